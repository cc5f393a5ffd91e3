"""Validation of Mutating/ValidatingWebhookConfigurations on create and update, as
kube-apiserver's ``admissionregistration.k8s.io/v1`` validation: 422 listing every bad
field (``webhooks[0].timeoutSeconds: Invalid value: 31: ...``).

Checked: webhook names (a DNS subdomain of at least three segments, unique),
``clientConfig`` (exactly one of an https ``url`` or a ``service`` with name, namespace,
port 1-65535 and a path starting with ``/``), ``rules`` (operations, non-empty
apiGroups/apiVersions/resources, scope), ``failurePolicy``, ``matchPolicy``,
``sideEffects`` (``None``/``NoneOnDryRun``), ``timeoutSeconds`` (1-30),
``admissionReviewVersions`` (must name v1 or v1beta1), ``reinvocationPolicy`` (mutating)
and ``matchConditions`` (at most 64, unique qualified names, expressions that compile,
see :mod:`bridge.cel`). Defaults are filled in like the server does (failurePolicy Fail,
matchPolicy Equivalent, timeoutSeconds 10, empty selectors, reinvocationPolicy Never,
rule scope ``*``, service port 443).
"""

from __future__ import annotations

import re
from typing import Any

from bridge.cel import compile_expression
from bridge.errors import CelError
from sandbox.kubeapi.errors import invalid_fields

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_OPERATIONS = ("*", "CREATE", "UPDATE", "DELETE", "CONNECT")

Cause = tuple[str, str, str]  # (field, reason, message)


def _unsupported(field: str, value: Any, allowed: tuple[str, ...]) -> Cause:
    supported = ", ".join(f'"{a}"' for a in allowed)
    return (
        field,
        "FieldValueNotSupported",
        f'Unsupported value: "{value}": supported values: {supported}',
    )


def _required(field: str, why: str = "") -> Cause:
    return (field, "FieldValueRequired", "Required value" + (f": {why}" if why else ""))


def _invalid(field: str, value: Any, why: str) -> Cause:
    shown = f'"{value}"' if isinstance(value, str) else value
    return (field, "FieldValueInvalid", f"Invalid value: {shown}: {why}")


def _enum(hook: dict[str, Any], key: str, where: str, allowed: tuple[str, ...]) -> list[Cause]:
    v = hook.get(key)
    if v is None:
        return []
    return [] if v in allowed else [_unsupported(f"{where}.{key}", v, allowed)]


def _client_config(cc: Any, where: str) -> list[Cause]:
    if not isinstance(cc, dict) or bool(cc.get("url")) == bool(cc.get("service")):
        return [_required(where, "exactly one of url or service is required")]
    if cc.get("url"):
        url = str(cc["url"])
        if not url.startswith("https://"):
            return [_invalid(f"{where}.url", url, "'https' is the only allowed URL scheme")]
        return []
    svc = cc["service"]
    out = []
    for f in ("namespace", "name"):
        if not isinstance(svc, dict) or not svc.get(f):
            out.append(_required(f"{where}.service.{f}", f"service {f} is required"))
    if not isinstance(svc, dict):
        return out
    svc.setdefault("port", 443)
    port = svc["port"]
    if not isinstance(port, int) or not 1 <= port <= 65535:
        out.append(
            _invalid(
                f"{where}.service.port",
                port,
                "port is not valid: must be between 1 and 65535, inclusive",
            )
        )
    path = svc.get("path")
    if path is not None and not str(path).startswith("/"):
        out.append(_invalid(f"{where}.service.path", path, "must start with a '/'"))
    return out


def _rules(rules: Any, where: str) -> list[Cause]:
    out: list[Cause] = []
    for i, r in enumerate(rules if isinstance(rules, list) else []):
        at = f"{where}[{i}]"
        if not isinstance(r, dict):
            out.append(_invalid(at, r, "must be an object"))
            continue
        for f in ("operations", "apiGroups", "apiVersions", "resources"):
            if not r.get(f):
                out.append(_required(f"{at}.{f}"))
        for j, op in enumerate(r.get("operations") or []):
            if op not in _OPERATIONS:
                out.append(_unsupported(f"{at}.operations[{j}]", op, _OPERATIONS))
        r.setdefault("scope", "*")
        if r["scope"] not in ("*", "Cluster", "Namespaced"):
            out.append(_unsupported(f"{at}.scope", r["scope"], ("*", "Cluster", "Namespaced")))
    return out


def _match_conditions(conds: Any, where: str) -> list[Cause]:
    if not conds:
        return []
    if not isinstance(conds, list):
        return [_invalid(where, conds, "must be a list")]
    out: list[Cause] = []
    if len(conds) > 64:
        out.append(
            (where, "FieldValueTooMany", f"Too many: {len(conds)}: must have at most 64 items")
        )
    seen: set[str] = set()
    for i, c in enumerate(conds):
        at = f"{where}[{i}]"
        name = str((c or {}).get("name") or "")
        if not name:
            out.append(_required(f"{at}.name"))
        elif not _QUALIFIED.match(name.rsplit("/", 1)[-1]):
            out.append(
                _invalid(
                    f"{at}.name",
                    name,
                    "name part must consist of alphanumeric characters, '-', '_' or '.', and "
                    "must start and end with an alphanumeric character",
                )
            )
        elif name in seen:
            out.append((f"{at}.name", "FieldValueDuplicate", f'Duplicate value: "{name}"'))
        seen.add(name)
        expr = (c or {}).get("expression")
        if not expr:
            out.append(_required(f"{at}.expression"))
            continue
        try:
            compile_expression(str(expr))
        except CelError as e:
            out.append(_invalid(f"{at}.expression", expr, f"compilation failed: {e.reason}"))
    return out


def _webhook(hook: Any, where: str, mutating: bool, seen: set[str]) -> list[Cause]:
    if not isinstance(hook, dict):
        return [_invalid(where, hook, "must be an object")]
    out: list[Cause] = []
    name = str(hook.get("name") or "")
    if not name:
        out.append(_required(f"{where}.name"))
    elif not _SUBDOMAIN.match(name) or len(name) > 253:
        out.append(
            _invalid(
                f"{where}.name",
                name,
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.'",
            )
        )
    elif len(name.split(".")) < 3:
        out.append(
            _invalid(
                f"{where}.name",
                name,
                "should be a domain with at least three segments separated by dots",
            )
        )
    elif name in seen:
        out.append((f"{where}.name", "FieldValueDuplicate", f'Duplicate value: "{name}"'))
    seen.add(name)
    out += _client_config(hook.get("clientConfig"), f"{where}.clientConfig")
    out += _rules(hook.get("rules"), f"{where}.rules")
    hook.setdefault("failurePolicy", "Fail")
    hook.setdefault("matchPolicy", "Equivalent")
    hook.setdefault("timeoutSeconds", 10)
    hook.setdefault("namespaceSelector", {})
    hook.setdefault("objectSelector", {})
    out += _enum(hook, "failurePolicy", where, ("Fail", "Ignore"))
    out += _enum(hook, "matchPolicy", where, ("Equivalent", "Exact"))
    if hook.get("sideEffects") is None:
        out.append(_required(f"{where}.sideEffects", "must specify one of None, NoneOnDryRun"))
    else:
        out += _enum(hook, "sideEffects", where, ("None", "NoneOnDryRun"))
    t = hook["timeoutSeconds"]
    if not isinstance(t, int) or isinstance(t, bool) or not 1 <= t <= 30:
        out.append(
            _invalid(
                f"{where}.timeoutSeconds", t, "the timeout value must be between 1 and 30 seconds"
            )
        )
    versions = hook.get("admissionReviewVersions") or []
    if not any(v in ("v1", "v1beta1") for v in versions):
        out.append(_required(f"{where}.admissionReviewVersions", "must specify one of v1, v1beta1"))
    if mutating:
        hook.setdefault("reinvocationPolicy", "Never")
        out += _enum(hook, "reinvocationPolicy", where, ("Never", "IfNeeded"))
    out += _match_conditions(hook.get("matchConditions"), f"{where}.matchConditions")
    return out


def validate_configuration(obj: dict[str, Any], *, mutating: bool) -> None:
    """Default and validate a webhook configuration in place; ApiError 422 when bad."""
    hooks = obj.get("webhooks")
    causes: list[Cause] = []
    if hooks is not None and not isinstance(hooks, list):
        causes.append(_invalid("webhooks", hooks, "must be a list"))
    seen: set[str] = set()
    for i, hook in enumerate(hooks if isinstance(hooks, list) else []):
        causes += _webhook(hook, f"webhooks[{i}]", mutating, seen)
    if not causes:
        return
    kind = "MutatingWebhookConfiguration" if mutating else "ValidatingWebhookConfiguration"
    name = (obj.get("metadata") or {}).get("name", "")
    raise invalid_fields(kind, "admissionregistration.k8s.io", name, causes)
