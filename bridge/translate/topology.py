"""A workload's topology request -> Slurm's: ``segment_size``, ``required_switches``,
``wait_for_switch`` (docs/topology.md). Pure.

Two ways to ask, on a pod or its group object (pod over group, like every slurmjob key):

* ours, in Slurm's own terms: ``slurmjob.slinky.slurm.net/segment: "4"`` (``sbatch
  --segment``: topology/block places the job in segments of that many nodes, each inside
  one block) and ``slurmjob.slinky.slurm.net/switches: "1@10:00"`` (``sbatch
  --switches=count[@max-time]``: topology/tree holds the job until it fits under that many
  leaf switches, or until max-time passed);
* Kueue's TAS annotations ``kueue.x-k8s.io/podset-required-topology`` /
  ``podset-preferred-topology``, whose value is a topology level (a node label), mapped
  through the config table ``topology.levels`` (label -> ``block`` | ``switch``).

Slurm decides where the job goes; the bridge only passes the request on. The explicit
keys win over a Kueue level.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from bridge.errors import InvalidInput
from bridge.translate import kobj
from bridge.wellknown import (
    ANNOTATION_KUEUE_PREFERRED_TOPOLOGY,
    ANNOTATION_KUEUE_REQUIRED_TOPOLOGY,
    ANNOTATION_TOPOLOGY_SPEC,
    slurmjob_annotation,
)

# segment_size is a uint16 in Slurm (NO_VAL16 = 65534 and up are special)
SEGMENT_MAX = 65533
# required_switches is a uint32; a job never needs more leaf switches than this
SWITCHES_MAX = 65533
# Slurm's time formats (sbatch --switches max-time, --time): minutes, minutes:seconds,
# hours:minutes:seconds, days-hours, days-hours:minutes, days-hours:minutes:seconds
_DURATION = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
_DURATION_MAX_SECONDS = 365 * 86400
# A node's Topology=: comma-separated <topology>:<unit>[:<unit>...] (tree: the switches
# from the top down to the leaf). Slurm's names: letters, digits, "_", ".", "-".
_NAME = r"[A-Za-z0-9_.-]+"
_NODE_TOPOLOGY = re.compile(rf"^{_NAME}(:{_NAME})+(,{_NAME}(:{_NAME})+)*$")
_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


class Switches(BaseModel):
    """``count[@max-time]`` of ``sbatch --switches``; ``wait_seconds`` None: Slurm's default
    (SchedulerParameters=max_switch_wait)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    count: int = Field(ge=1)
    wait_seconds: int | None = Field(default=None, ge=0)


class TopologyRequest(BaseModel):
    """What the job description carries; all None: no request."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    segment_size: int | None = Field(default=None, ge=1)
    required_switches: int | None = Field(default=None, ge=1)
    wait_for_switch_seconds: int | None = Field(default=None, ge=0)


class TopologyPolicy(BaseModel):
    """The part of the config's ``topology:`` section translation needs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    levels: dict[str, str] = Field(default_factory=dict)  # label -> "block" | "switch"
    required_switch_wait_seconds: int = 86400
    preferred_switch_wait_seconds: int = 60
    # a node's Topology= from its labels (topology.nodeLabels): topology name, labels
    node_topology_name: str | None = None
    node_topology_labels: tuple[str, ...] = ()


def slurm_duration(text: str, field: str, obj: str | None) -> int:
    """Seconds of a Slurm time string (``10`` = 10 minutes, ``1:30`` = 90 s, ``1-0`` = a day)."""
    m = _DURATION.match(text.strip())
    if m is None:
        raise InvalidInput(
            field,
            f"{text!r} is not a Slurm time (minutes, minutes:seconds, hours:minutes:seconds, "
            "days-hours, days-hours:minutes or days-hours:minutes:seconds)",
            obj,
        )
    days, a, b, c = m.groups()
    if days is not None:  # days-hours[:minutes[:seconds]]
        seconds = int(days) * 86400 + int(a) * 3600 + int(b or 0) * 60 + int(c or 0)
    elif c is not None:  # hours:minutes:seconds
        seconds = int(a) * 3600 + int(b) * 60 + int(c)
    elif b is not None:  # minutes:seconds
        seconds = int(a) * 60 + int(b)
    else:  # minutes
        seconds = int(a) * 60
    if seconds > _DURATION_MAX_SECONDS:
        raise InvalidInput(field, f"{text!r} is longer than a year", obj)
    return seconds


def parse_segment(value: str, field: str, obj: str | None) -> int:
    text = value.strip()
    if not text.isdigit() or not 1 <= int(text) <= SEGMENT_MAX:
        raise InvalidInput(field, f"{value!r} must be a node count from 1 to {SEGMENT_MAX}", obj)
    return int(text)


def parse_switches(value: str, field: str, obj: str | None) -> Switches:
    """``1``, ``1@10`` (10 minutes), ``2@1:00:00`` (an hour): sbatch --switches' syntax."""
    count, sep, wait = value.strip().partition("@")
    if not count.isdigit() or not 1 <= int(count) <= SWITCHES_MAX:
        raise InvalidInput(
            field,
            f"{value!r} must be count[@max-time], a leaf switch count from 1 to {SWITCHES_MAX} "
            'and a Slurm time, e.g. "1@10:00"',
            obj,
        )
    if sep and not wait:
        raise InvalidInput(field, f"{value!r} has no max-time after @", obj)
    return Switches(
        count=int(count), wait_seconds=slurm_duration(wait, field, obj) if sep else None
    )


def parse_level(value: str, field: str, obj: str | None) -> str:
    """A Kueue topology level: a node label key."""
    text = value.strip()
    if len(text) > 316 or not _LABEL_KEY.match(text):
        raise InvalidInput(field, f"{value!r} is not a node label key (a topology level)", obj)
    return text


def level_problems(
    required: str | None, preferred: str | None, levels: Mapping[str, str], obj: str | None
) -> list[InvalidInput]:
    """A Kueue level the config does not map, or both annotations at once. Without any
    configured level the Kueue annotations are not the bridge's to judge: none."""
    out: list[InvalidInput] = []
    if not levels:
        return out
    if required is not None and preferred is not None:
        out.append(
            InvalidInput(
                ANNOTATION_KUEUE_PREFERRED_TOPOLOGY,
                f"set only one of {ANNOTATION_KUEUE_REQUIRED_TOPOLOGY} and "
                f"{ANNOTATION_KUEUE_PREFERRED_TOPOLOGY}",
                obj,
            )
        )
    for key, level in (
        (ANNOTATION_KUEUE_REQUIRED_TOPOLOGY, required),
        (ANNOTATION_KUEUE_PREFERRED_TOPOLOGY, preferred),
    ):
        if level is not None and level not in levels:
            known = ", ".join(sorted(levels)) or "none configured"
            out.append(
                InvalidInput(
                    key,
                    f"topology level {level!r} is not in the bridge config's topology.levels "
                    f"(known: {known})",
                    obj,
                )
            )
    return out


def topology_request(
    *,
    segment: int | None,
    switches: Switches | None,
    required_level: str | None,
    preferred_level: str | None,
    nodes: int,
    policy: TopologyPolicy,
    where: str,
) -> TopologyRequest:
    """Slurm's request for a job of ``nodes`` nodes (its minimum node count).

    Explicit ``segment`` / ``switches`` win over a Kueue level. A required level of kind
    ``block`` is ``segment_size = nodes`` (the whole job inside one block; Slurm holds it
    until one block has room). Without ``policy.levels`` Kueue's annotations are ignored.
    Kind ``switch`` is one leaf switch, with the configured
    required or preferred wait (Slurm caps it at max_switch_wait). A preferred ``block``
    adds nothing: topology/block already keeps a job that fits one block inside one.
    """
    if segment is not None and nodes > segment and nodes % segment:
        raise InvalidInput(
            slurmjob_annotation("segment"),
            f"a job of {nodes} nodes is not a whole number of segments of {segment} "
            "(Slurm: the node count must be evenly divisible by the segment size)",
            where,
        )
    if switches is not None and switches.count > nodes:
        raise InvalidInput(
            slurmjob_annotation("switches"),
            f"{switches.count} leaf switches for a job of {nodes} nodes",
            where,
        )
    if segment is not None or switches is not None:
        return TopologyRequest(
            segment_size=segment,
            required_switches=switches.count if switches else None,
            wait_for_switch_seconds=switches.wait_seconds if switches else None,
        )
    if not policy.levels:  # Kueue's levels are mapped only when the config says how
        return TopologyRequest()
    problems = level_problems(required_level, preferred_level, policy.levels, where)
    if problems:
        raise problems[0]
    level = required_level or preferred_level
    if level is None:
        return TopologyRequest()
    plugin = policy.levels[level]
    if plugin == "block":
        return TopologyRequest(segment_size=nodes) if required_level else TopologyRequest()
    wait = (
        policy.required_switch_wait_seconds
        if required_level
        else policy.preferred_switch_wait_seconds
    )
    return TopologyRequest(required_switches=1, wait_for_switch_seconds=wait)


def node_topology(node: Mapping[str, object], policy: TopologyPolicy) -> str | None:
    """A Kubernetes node's place in Slurm's topology, as Slurm's ``Topology=`` string, or
    None when it names none. The annotation ``topology.slinky.slurm.net/spec`` (upstream's,
    verbatim) wins; else ``<node_topology_name>:<label value>...`` when the node carries
    every label of ``node_topology_labels`` (outermost first). InvalidInput names a bad
    annotation or label value."""
    where = kobj.describe(node, "Node")
    annotated = kobj.annotations(node).get(ANNOTATION_TOPOLOGY_SPEC)
    if annotated is not None:
        text = str(annotated).strip()
        if not _NODE_TOPOLOGY.match(text):
            raise InvalidInput(
                f"metadata.annotations[{ANNOTATION_TOPOLOGY_SPEC}]",
                f"{annotated!r} is not a Slurm topology string "
                '(<topology>:<block or switch>[:<switch>...], e.g. "net:block-0")',
                where,
            )
        return text
    if policy.node_topology_name is None or not policy.node_topology_labels:
        return None
    labels = kobj.labels(node)
    values = [labels.get(k) for k in policy.node_topology_labels]
    if any(v is None or v == "" for v in values):
        return None
    for key, value in zip(policy.node_topology_labels, values, strict=True):
        if not re.fullmatch(_NAME, str(value)):
            raise InvalidInput(
                f"metadata.labels[{key}]", f"{value!r} is not a Slurm topology unit name", where
            )
    return ":".join([policy.node_topology_name, *(str(v) for v in values)])
