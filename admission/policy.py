"""Which objects the webhook manages, and safe field access on untrusted objects. Pure.

A pod is managed when its schedulerName is already ours, or when it asks for the default
scheduler (``default-scheduler`` or empty) and its namespace is managed (listed in
``managedNamespaces`` or matching ``managedNamespaceSelector``). A pod that names another
custom scheduler is never managed: the bridge does not steal pods from other schedulers.

Namespace labels are an input (:class:`AdmissionContext.namespace_labels`), looked up by the
server's cache, so that :func:`admission.mutate.mutate` and
:func:`admission.validate.validate` stay pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from bridge.config import BridgeConfig
from bridge.errors import InvalidInput
from bridge.translate.policy import ResolvedPolicy, resolve_policy

DEFAULT_SCHEDULER = "default-scheduler"


@dataclass(frozen=True)
class AdmissionContext:
    """Everything the pure functions need besides the request."""

    config: BridgeConfig
    # Labels of the request's namespace; None when they were not looked up (not needed).
    namespace_labels: Mapping[str, str] | None = field(default=None)
    # Node name -> why it is a Slurm node ("" when it is not): the node a new pod names,
    # looked up by the server for the Slurm-node guard (admission.placement).
    slurm_nodes: Mapping[str, str] = field(default_factory=dict)

    @property
    def scheduler_name(self) -> str:
        return self.config.scheduler_name

    def with_namespace_labels(self, labels: Mapping[str, str] | None) -> AdmissionContext:
        return replace(self, namespace_labels=labels)

    def with_slurm_node(self, name: str, reason: str) -> AdmissionContext:
        return replace(self, slurm_nodes={**self.slurm_nodes, name: reason})

    def needs_namespace_labels(self, namespace: str) -> bool:
        """True when only the namespace's labels can tell whether it is managed."""
        cfg = self.config
        sel = cfg.managed_namespace_selector
        managed_by_selector = (
            namespace not in cfg.managed_namespaces
            and sel is not None
            and bool(sel.match_labels or sel.match_expressions)
        )
        policy_by_selector = any(p.namespace_selector is not None for p in cfg.namespace_policies)
        return bool(namespace) and (managed_by_selector or policy_by_selector)

    def namespace_managed(self, namespace: str) -> bool:
        return self.config.namespace_is_managed(namespace, self.namespace_labels or {})

    def namespace_policy(self, namespace: str) -> ResolvedPolicy:
        """The Slurm identity policy of ``namespace`` (bridge/translate/policy.py)."""
        return resolve_policy(self.config, namespace, self.namespace_labels or {})

    def is_bridge_user(self, username: str) -> bool:
        return username in self.config.admission.bridge_usernames


def mapping_at(obj: Mapping[str, Any], path: str, errors: list[InvalidInput]) -> dict[str, Any]:
    """The object at dotted ``path`` (``{}`` when absent); a non-object is an error."""
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return {}
        cur = cur.get(part)
        if cur is None:
            return {}
    if not isinstance(cur, dict):
        errors.append(InvalidInput(path, f"must be an object, got {type(cur).__name__}"))
        return {}
    return cur


def scheduler_name_of(spec: Mapping[str, Any], path: str, errors: list[InvalidInput]) -> str:
    value = spec.get("schedulerName")
    if value is None:
        return ""
    if not isinstance(value, str):
        errors.append(InvalidInput(path, f"must be a string, got {type(value).__name__}"))
        return ""
    return value


def pod_managed(scheduler_name: str, namespace: str, ctx: AdmissionContext) -> bool:
    if scheduler_name == ctx.scheduler_name:
        return True
    if scheduler_name not in ("", DEFAULT_SCHEDULER):
        return False  # another custom scheduler: leave the pod alone
    return ctx.namespace_managed(namespace)
