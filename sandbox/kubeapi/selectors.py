"""Label and field selectors, parsed the way kube-apiserver parses them.

Label selectors: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a)``, ``k``,
``!k``, ``k>1``, ``k<1``, comma-separated (AND). Field selectors: ``f=v``, ``f==v``,
``f!=v`` on the labels a resource supports; others are a 400 like the real server.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bridge.translate.split import split_top_level
from sandbox.kubeapi.errors import ApiError, bad_request

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VAL = r"[-A-Za-z0-9_.]*"
_REQ = re.compile(
    rf"""^\s*(?:
        (?P<notkey>!\s*{_KEY})
      | (?P<setkey>{_KEY})\s+(?P<setop>in|notin)\s*\((?P<vals>[^)]*)\)
      | (?P<cmpkey>{_KEY})\s*(?P<op>==|=|!=|>|<)\s*(?P<val>{_VAL})
      | (?P<key>{_KEY})
    )\s*$""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", ">", "<"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        has = self.key in labels
        val = labels.get(self.key)
        if self.op == "exists":
            return has
        if self.op == "!":
            return not has
        if self.op in ("=", "in"):
            return has and val in self.values
        if self.op in ("!=", "notin"):
            return not has or val not in self.values
        if self.op in (">", "<"):
            try:
                lv, rv = int(val or ""), int(self.values[0])
            except ValueError:
                return False
            return lv > rv if self.op == ">" else lv < rv
        return False


def parse_label_selector(s: str | None) -> list[Requirement]:
    """Parse a label selector; raises a 400 ApiError naming the bad requirement."""
    if not s:
        return []
    out: list[Requirement] = []
    for part in split_top_level(s):
        m = _REQ.match(part)
        if not m:
            raise bad_request(f"unable to parse requirement: {part.strip()!r}")
        if m["notkey"]:
            out.append(Requirement(m["notkey"].lstrip("!").strip(), "!"))
        elif m["setkey"]:
            vals = tuple(v.strip() for v in m["vals"].split(",") if v.strip())
            out.append(Requirement(m["setkey"], m["setop"], vals))
        elif m["cmpkey"]:
            op = "=" if m["op"] == "==" else m["op"]
            out.append(Requirement(m["cmpkey"], op, (m["val"],)))
        else:
            out.append(Requirement(m["key"], "exists"))
    return out


def labels_match(reqs: list[Requirement], obj: dict[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(r.matches(labels) for r in reqs)


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    negate: bool
    value: str


def parse_field_selector(s: str | None, supported: frozenset[str]) -> list[FieldRequirement]:
    """Parse a field selector; unknown field labels are a 400 like the real server."""
    if not s:
        return []
    out: list[FieldRequirement] = []
    for part in s.split(","):
        part = part.strip()
        if not part:
            continue
        m = re.match(r"^([^=!]+)(==|!=|=)(.*)$", part)
        if not m:
            raise bad_request(f"invalid selector: {part!r}; can't understand {part!r}")
        field, op, value = m.group(1).strip(), m.group(2), m.group(3).strip()
        if field not in supported:
            raise ApiError(400, "BadRequest", f"field label not supported: {field}")
        out.append(FieldRequirement(field, op == "!=", value))
    return out


def field_value(obj: dict[str, Any], path: str) -> str:
    """The string a field selector compares against (missing = empty string)."""
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def fields_match(reqs: list[FieldRequirement], obj: dict[str, Any]) -> bool:
    for r in reqs:
        if r.field == "source":
            v = field_value(obj, "source.component")
        else:
            v = field_value(obj, r.field)
        if (v == r.value) == r.negate:
            return False
    return True
