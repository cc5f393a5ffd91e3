"""The ``slurmjob.slinky.slurm.net/<key>`` annotations, parsed into typed options.

Every key upstream accepts (``bridge.wellknown.SLURMJOB_KEYS``) and our topology keys
(``BRIDGE_SLURMJOB_KEYS``) is one optional field of :class:`SlurmJobOptions`, and so are
Kueue's two topology annotations (:mod:`bridge.translate.topology`). An unknown key under
the prefix is an error (a typo would otherwise be silently ignored), and so is the legacy
``slinky.slurm.net/job-name`` set to a different value than the current key.

:func:`annotation_errors` reports every problem (the admission webhook shows them all);
:func:`parse_slurmjob_annotations` raises the first one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from bridge.errors import InvalidInput
from bridge.text import checked_text
from bridge.translate.quantity import mebibytes, whole_cpus
from bridge.translate.topology import (
    Switches,
    level_problems,
    parse_level,
    parse_segment,
    parse_switches,
)
from bridge.wellknown import (
    ANNOTATION_KUEUE_PREFERRED_TOPOLOGY,
    ANNOTATION_KUEUE_REQUIRED_TOPOLOGY,
    BRIDGE_SLURMJOB_KEYS,
    LEGACY_ANNOTATION_JOB_NAME,
    SLURMJOB_KEYS,
    SLURMJOB_PREFIX,
    slurmjob_annotation,
)

# Slurm stores most counts as uint32 with special values near the top; stay well below.
_MAX_INT = 2**31 - 1
_INT = re.compile(r"^\+?\d{1,10}$")


class SlurmJobOptions(BaseModel):
    """Typed values of the slurmjob annotations of one object; ``None`` = not set."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    account: str | None = None
    constraints: str | None = None
    cpu_per_task: int | None = None
    exclusive: bool | None = None
    gres: str | None = None
    group_id: str | None = None
    job_name: str | None = None
    licenses: str | None = None
    max_nodes: int | None = None
    mem_per_node_mib: int | None = None
    min_nodes: int | None = None
    partition: str | None = None
    priority: int | None = None
    qos: str | None = None
    reservation: str | None = None
    timelimit_minutes: int | None = None
    user_id: str | None = None
    wckey: str | None = None
    # topology (docs/topology.md)
    segment: int | None = None
    switches: Switches | None = None
    required_topology: str | None = None
    preferred_topology: str | None = None

    def overlay(self, lower: SlurmJobOptions) -> SlurmJobOptions:
        """These options, with unset fields taken from ``lower`` (lower precedence)."""
        merged = lower.model_dump(exclude_none=True)
        merged.update(self.model_dump(exclude_none=True))
        return SlurmJobOptions(**merged)

    def set_fields(self) -> dict[str, Any]:
        """Only the fields that were set (for comparing pods of one group)."""
        return self.model_dump(exclude_none=True)


Parser = Callable[[str, str, "str | None"], Any]


def _text(value: str, field: str, obj: str | None) -> str:
    return checked_text(value, field, obj)


def _token(value: str, field: str, obj: str | None) -> str:
    """A single word (account, partition, qos ...): no whitespace inside."""
    text = _text(value, field, obj)
    if any(c.isspace() for c in text):
        raise InvalidInput(field, f"{text!r} must not contain whitespace", obj)
    return text


def _int(minimum: int) -> Parser:
    def parse(value: str, field: str, obj: str | None) -> int:
        text = value.strip()
        if not _INT.match(text):
            raise InvalidInput(field, f"{value!r} is not a whole number", obj)
        n = int(text)
        if n < minimum:
            raise InvalidInput(field, f"must be at least {minimum}, got {n}", obj)
        if n > _MAX_INT:
            raise InvalidInput(field, f"must be at most {_MAX_INT}, got {n}", obj)
        return n

    return parse


def _bool(value: str, field: str, obj: str | None) -> bool:
    text = value.strip().lower()
    if text == "true":
        return True
    if text == "false":
        return False
    raise InvalidInput(field, f'{value!r} must be "true" or "false"', obj)


def _cpus(value: str, field: str, obj: str | None) -> int:
    n = whole_cpus(value, field=field, obj=obj)
    if n < 1:
        raise InvalidInput(field, "must be more than 0 CPUs", obj)
    if n > _MAX_INT:
        raise InvalidInput(field, "too many CPUs", obj)
    return n


def _memory(value: str, field: str, obj: str | None) -> int:
    n = mebibytes(value, field=field, obj=obj)
    if n < 1:
        raise InvalidInput(field, "must be more than 0 bytes", obj)
    if n > _MAX_INT:
        raise InvalidInput(field, "too much memory", obj)
    return n


# annotation key (after the prefix) -> (SlurmJobOptions field, parser)
_PARSERS: dict[str, tuple[str, Parser]] = {
    "account": ("account", _token),
    "constraints": ("constraints", _text),
    "cpu-per-task": ("cpu_per_task", _cpus),
    "exclusive": ("exclusive", _bool),
    "gres": ("gres", _token),
    "group-id": ("group_id", _token),
    "job-name": ("job_name", _text),
    "licenses": ("licenses", _token),
    "max-nodes": ("max_nodes", _int(1)),
    "mem-per-node": ("mem_per_node_mib", _memory),
    "min-nodes": ("min_nodes", _int(1)),
    "partition": ("partition", _token),
    "priority": ("priority", _int(0)),
    "qos": ("qos", _token),
    "reservation": ("reservation", _token),
    "timelimit": ("timelimit_minutes", _int(1)),
    "user-id": ("user_id", _token),
    "wckey": ("wckey", _token),
    "segment": ("segment", parse_segment),
    "switches": ("switches", parse_switches),
}
_KNOWN_KEYS = SLURMJOB_KEYS + BRIDGE_SLURMJOB_KEYS
assert set(_PARSERS) == set(_KNOWN_KEYS), "every key has exactly one parser"
_KEY_OF_FIELD = {field: key for key, (field, _) in _PARSERS.items()}
# Kueue's TAS annotations (full names): read with the slurmjob keys, same precedence
KUEUE_TOPOLOGY_KEYS: dict[str, str] = {
    ANNOTATION_KUEUE_REQUIRED_TOPOLOGY: "required_topology",
    ANNOTATION_KUEUE_PREFERRED_TOPOLOGY: "preferred_topology",
}
_NAME_OF_FIELD = {field: name for name, field in KUEUE_TOPOLOGY_KEYS.items()}


def annotation_key(field: str) -> str:
    """The full annotation name of a :class:`SlurmJobOptions` field."""
    if field in _NAME_OF_FIELD:
        return _NAME_OF_FIELD[field]
    return slurmjob_annotation(_KEY_OF_FIELD[field])


def _an_option(name: str) -> bool:
    """An annotation name the options are parsed from (the rest are not read)."""
    return (
        name in KUEUE_TOPOLOGY_KEYS
        or name == LEGACY_ANNOTATION_JOB_NAME
        or name.startswith(SLURMJOB_PREFIX)
    )


def option_annotations(annotations: Mapping[str, str]) -> dict[str, str]:
    """The annotations :func:`parse_slurmjob_annotations` reads, and nothing else: two
    objects with the same ones have the same options (a translation cache keys on them)."""
    return {k: v for k, v in annotations.items() if _an_option(k)}


def _parse(annotations: Mapping[str, str], obj: str) -> tuple[SlurmJobOptions, list[InvalidInput]]:
    values: dict[str, Any] = {}
    errors: list[InvalidInput] = []
    for name in sorted(annotations):
        raw = annotations[name]
        if not _an_option(name):
            continue
        if name in KUEUE_TOPOLOGY_KEYS:
            entry: tuple[str, Parser] | None = (KUEUE_TOPOLOGY_KEYS[name], parse_level)
        elif name == LEGACY_ANNOTATION_JOB_NAME:
            continue
        else:
            entry = _PARSERS.get(name[len(SLURMJOB_PREFIX) :])
        if entry is None:
            known = ", ".join(_KNOWN_KEYS)
            errors.append(InvalidInput(name, f"unknown annotation key; known keys: {known}", obj))
            continue
        field, parser = entry
        if not isinstance(raw, str):
            errors.append(InvalidInput(name, "annotation values must be strings", obj))
            continue
        try:
            values[field] = parser(raw, name, obj)
        except InvalidInput as e:
            errors.append(e)

    legacy = annotations.get(LEGACY_ANNOTATION_JOB_NAME)
    if legacy is not None:
        errors += _legacy_job_name(legacy, annotations, values, obj)

    lo, hi = values.get("min_nodes"), values.get("max_nodes")
    if lo is not None and hi is not None and lo > hi:
        errors.append(
            InvalidInput(
                slurmjob_annotation("min-nodes"),
                f"min-nodes ({lo}) is larger than max-nodes ({hi})",
                obj,
            )
        )
    return SlurmJobOptions(**values), errors


def _legacy_job_name(
    legacy: object, annotations: Mapping[str, str], values: dict[str, Any], obj: str
) -> list[InvalidInput]:
    """Accept the v0.x ``slinky.slurm.net/job-name``; a different current value conflicts."""
    current_key = slurmjob_annotation("job-name")
    if not isinstance(legacy, str):
        return [InvalidInput(LEGACY_ANNOTATION_JOB_NAME, "annotation values must be strings", obj)]
    try:
        name = _text(legacy, LEGACY_ANNOTATION_JOB_NAME, obj)
    except InvalidInput as e:
        return [e]
    if current_key not in annotations:
        values["job_name"] = name
    elif "job_name" in values and values["job_name"] != name:
        return [
            InvalidInput(
                LEGACY_ANNOTATION_JOB_NAME,
                f"conflicts with {current_key} ({name!r} != {values['job_name']!r}); set only one",
                obj,
            )
        ]
    return []


def parse_annotations_all(
    annotations: Mapping[str, str], *, obj: str, levels: Mapping[str, str] | None = None
) -> tuple[SlurmJobOptions, list[InvalidInput]]:
    """The options that parsed, and every problem (the admission webhook checks both).
    ``levels``: the config's ``topology.levels``, to check a Kueue level against (None:
    not checked)."""
    options, errors = _parse(annotations, obj)
    if levels is not None:
        errors += level_problems(options.required_topology, options.preferred_topology, levels, obj)
    return options, errors


def annotation_errors(
    annotations: Mapping[str, str], *, obj: str, levels: Mapping[str, str] | None = None
) -> list[InvalidInput]:
    """Every problem with the slurmjob (and Kueue topology) annotations of one object
    (empty: all good); ``levels`` as in :func:`parse_annotations_all`."""
    return parse_annotations_all(annotations, obj=obj, levels=levels)[1]


def parse_slurmjob_annotations(annotations: Mapping[str, str], *, obj: str) -> SlurmJobOptions:
    """The typed options of one object, or the FIRST InvalidInput (by annotation name)."""
    options, errors = _parse(annotations, obj)
    if errors:
        raise errors[0]
    return options
