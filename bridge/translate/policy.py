"""A namespace's Slurm identity and limits (``namespacePolicies``), as ONE pure function.

Both the admission webhook (deny at once, naming the key, the value and the rule) and the
scheduler (right before any submit or allocate: a webhook can be bypassed) call
:func:`enforce_policy`, so they can never disagree.

* the policed keys (:data:`bridge.config.POLICED_POD_KEYS`: ``gres``, ``cpu-per-task``,
  ``mem-per-node``, ``licenses``, ``min-nodes``), which can make a job hold
  more than, or other than, what its pods ask, are refused unless the policy's
  ``allowPodKeys`` lists them; the other keys (``timelimit``, ``job-name`` ...) are open.
* ``user-id``, ``group-id`` and ``priority`` set by a pod (or its group object) are
  refused unless the policy's ``allowPodUserId`` / ``allowPodGroupId`` /
  ``allowPodPriority`` says otherwise; ``defaultNamespacePolicy`` (where no entry
  matches) allows none of them by default. A PriorityClass's value
  (``scheduler.priorityFromPriorityClass``) is the pod's choice too: used only where
  ``allowPodPriority`` is set, ignored elsewhere (every pod has a class, so it is not
  refused).
* The policy's ``user`` and ``group`` are what the job runs as when the pod may not (or
  does not) choose.
* ``account``, ``partition``, ``qos`` and ``reservation`` must be among the allowed
  values when the policy lists any; when a pod names none, the policy's default is used
  (a list of accounts or QOS without a default is refused when the config loads:
  :class:`bridge.config.NamespacePolicy`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bridge.config import POLICED_POD_KEYS, BridgeConfig, NamespacePolicy
from bridge.errors import InvalidInput
from bridge.translate.annotations import SlurmJobOptions, annotation_key
from bridge.wellknown import slurmjob_annotation


@dataclass(frozen=True)
class ResolvedPolicy:
    """The policy that applies to one namespace, with its name in the config (``rule``)."""

    rule: str
    policy: NamespacePolicy


def resolve_policy(
    config: BridgeConfig, namespace: str, labels: Mapping[str, str]
) -> ResolvedPolicy:
    """The policy of ``namespace`` (first matching ``namespacePolicies`` entry, else
    ``defaultNamespacePolicy``); ``labels`` are the namespace's."""
    rule, policy = config.namespace_policy(namespace, labels)
    return ResolvedPolicy(rule, policy)


# SlurmJobOptions field -> (allowPod* flag name in the config, policy attribute)
_POD_CHOSEN = (
    ("user_id", "allowPodUserId", "allow_pod_user_id", "the Slurm user"),
    ("group_id", "allowPodGroupId", "allow_pod_group_id", "the Slurm group"),
    ("priority", "allowPodPriority", "allow_pod_priority", "the job priority"),
)
# SlurmJobOptions field -> (allowed list name, policy attribute of the list, of the default)
_LISTED = (
    ("account", "accounts", "accounts", "default_account"),
    ("partition", "partitions", "partitions", "default_partition"),
    ("qos", "qos", "qos", "default_qos"),
    ("reservation", "reservations", "reservations", "default_reservation"),
)


def policy_errors(
    opts: SlurmJobOptions, resolved: ResolvedPolicy, *, obj: str | None, partition: str
) -> list[InvalidInput]:
    """Every way ``opts`` (the parsed slurmjob annotations) break the policy.

    ``partition`` is the partition the job would get when neither the pod nor the policy
    names one (the config's ``partition``).
    """
    pol, rule = resolved.policy, resolved.rule
    errors: list[InvalidInput] = []
    set_keys = {annotation_key(f) for f in opts.set_fields()}
    for key in POLICED_POD_KEYS:
        if slurmjob_annotation(key) in set_keys and key not in pol.allow_pod_keys:
            errors.append(
                InvalidInput(
                    slurmjob_annotation(key),
                    f"denied: pods may not set {key}, which can make the job hold more than "
                    f"its pods ask (rule {rule}.allowPodKeys does not list {key!r})",
                    obj,
                )
            )
    for field, flag, attr, what in _POD_CHOSEN:
        value = getattr(opts, field)
        if value is not None and not getattr(pol, attr):
            errors.append(
                InvalidInput(
                    annotation_key(field),
                    f"{str(value)!r} denied: pods may not choose {what} "
                    f"(rule {rule}.{flag} is false)",
                    obj,
                )
            )
    for field, list_name, attr, default_attr in _LISTED:
        allowed: tuple[str, ...] = getattr(pol, attr)
        if not allowed:
            continue
        value = getattr(opts, field)
        if value is None:
            value = getattr(pol, default_attr)
            if value is None and field == "partition":
                value = partition
            if value is None:
                continue
            if value not in allowed:
                errors.append(
                    InvalidInput(
                        annotation_key(field),
                        f"none set, and the default {value!r} is not allowed "
                        f"(rule {rule}.{list_name}: {', '.join(allowed)})",
                        obj,
                    )
                )
            continue
        if value not in allowed:
            errors.append(
                InvalidInput(
                    annotation_key(field),
                    f"{value!r} denied: not allowed "
                    f"(rule {rule}.{list_name}: {', '.join(allowed)})",
                    obj,
                )
            )
    return errors


def enforce_policy(
    opts: SlurmJobOptions,
    resolved: ResolvedPolicy,
    *,
    obj: str | None,
    partition: str,
    class_priority: int | None = None,
) -> SlurmJobOptions:
    """``opts`` with the policy's identity and defaults filled in, or the first
    :class:`InvalidInput` (by annotation name) when they break it.

    ``class_priority`` is the pods' PriorityClass value when ``priorityFromPriorityClass``
    maps it: a priority the pod chose (it picks its class), so it becomes the job's only
    where ``allowPodPriority`` is set, like the ``priority`` annotation; elsewhere Slurm's
    own priority applies.
    """
    errors = policy_errors(opts, resolved, obj=obj, partition=partition)
    if errors:
        raise sorted(errors, key=lambda e: e.field)[0]
    pol = resolved.policy
    priority = opts.priority
    if priority is None and pol.allow_pod_priority:
        priority = class_priority
    update = {
        "priority": priority,
        "account": opts.account or pol.default_account,
        "partition": opts.partition or pol.default_partition,
        "qos": opts.qos or pol.default_qos,
        "reservation": opts.reservation or pol.default_reservation,
        "user_id": opts.user_id or pol.user,
        "group_id": opts.group_id or pol.group,
    }
    return opts.model_copy(update=update)
