"""The one packer of a node's GPU devices (pure): how many devices of each kind Slurm has
on a node (its layout, ``gpu:3g.40gb:1,gpu:2g.20gb:1,gpu:1g.10gb:9``), placed on the
devices the node's ResourceSlices publish, every one a distinct device and all of them
together within the GPUs' counters.

Every question of that kind asks this module: which DRA device Slurm's ``IDX`` names
(:mod:`bridge.devices.allocation`), whether Slurm's GRES and the node's devices agree (the
condition ``SlinkySlurmGRESCompatible``), what to register for an external node
(:mod:`bridge.devices.node_gres`) and whether the sandbox's layout fits a GPU model.

**The node** (:func:`node_of`): devices as :class:`Unit`\\ s (a key, the kind Slurm counts
it as, the counters it consumes), the counter sets' sizes. Devices that share a counter
set are one **GPU** (a connected group); a device that consumes none stands alone. A
GPU's full device and its MIG slices published without counters (static MIG: the
instances an admin created) exclude each other by ``uuid``/``parentUUID``: that is a
counter too (the full device takes all, each slice one). Nothing is read from names.

**Exact and fast.** Per GPU, the distinct count vectors (how many of each wanted kind) of
the sets of its devices that fit its counters together, each with the first such set
(a walk in the GPU's canonical order that never explores a (position, counters left,
counts) state twice). Across GPUs, an assignment of those vectors that sums to the
layout: a search over GPUs whose state is (GPU, what is left to place), so the orders of
alike GPUs meet in one state, remembering the states that failed, pruned by what the
remaining GPUs can hold of each kind and, over alike GPUs, by what their counters and
memory slices hold together. It finds a packing whenever one exists, and
:class:`Unpackable` names the kind that is short (and the counter in the way) when none
does.

**Deterministic.** Devices, GPUs and counters are ordered by what the slices publish
(GPUs by their number ``parentIndex``/``parentMinor``/``index``/``minor``, else their
names in natural order; in a GPU the full device before its slices, then by ``placement``
or the counters consumed, the larger first, then by name), never by hashing: the same
node and layout give the same packing in every process.

``fixed`` devices (held by claims already) must be part of the packing: where Slurm only
counts, a claim takes a free device the packing of the rest chose, so what is still free
stays packable.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

Kind = Any  # what Slurm counts a device as (hashable: a typed GRES, a GresKind)
CounterRef = tuple[str, str]  # (counter set, counter)
Amount = int | Decimal
_DIGITS = re.compile(r"(\d+)")
_UNORDERED = 1 << 30
EXCLUSIVE_SET = "parentUUID:"  # the counter set of a GPU's full device and static slices


def natural(text: str) -> tuple[tuple[int, str], ...]:
    """``gpu-10`` after ``gpu-9``: digits compared as numbers."""
    return tuple((int(p), "") if p.isdigit() else (-1, p) for p in _DIGITS.split(text) if p != "")


def _amount(value: Decimal) -> Amount:
    return int(value) if value == value.to_integral_value() else value


@dataclass(frozen=True, slots=True)
class Unit:
    """One device as the packer sees it. ``key``: unique on the node; ``kind``: what Slurm
    counts it as (``None``-free hashable, e.g. the typed GRES); ``consumes``: (counter
    set, counter) -> amount; ``uuid``/``parent``: the GPU it is (a full device) or belongs
    to (a MIG slice); ``gpu``/``placement``: its GPU's number and its placement where the
    slices publish them (for the order only)."""

    key: str
    kind: Kind
    consumes: Mapping[CounterRef, Decimal] = field(default_factory=dict)
    part: bool = False  # a MIG slice (a partition of a GPU), not a full device
    uuid: str | None = None
    parent: str | None = None
    gpu: int | None = None
    placement: int | None = None


class _Natural(dict[str, tuple[tuple[int, str], ...]]):
    """:func:`natural`, each text computed once (one node's worth)."""

    def __missing__(self, text: str) -> tuple[tuple[int, str], ...]:
        self[text] = natural(text)
        return self[text]

    def unit(self, u: Unit) -> tuple[object, ...]:
        """The order of a GPU's devices: its full device first, then by placement (the
        attribute, else the counters consumed), the larger first, then by name."""
        return (
            u.part,
            u.placement if u.placement is not None else _UNORDERED,
            () if u.placement is not None else tuple(sorted(c for _, c in u.consumes)),
            -len(u.consumes),  # the larger of two placements at one start first
            u.key,
        )


@dataclass(frozen=True)
class Gpu:
    """A group of devices drawing on the same counters (one physical GPU), in canonical
    order, with its counters as local indices."""

    units: tuple[Unit, ...]
    counters: tuple[CounterRef, ...]
    capacity: tuple[Amount, ...]
    use: tuple[tuple[tuple[int, Amount], ...], ...]  # per unit: (counter index, amount)
    shared: bool  # its devices consume published counters (they are alternatives)

    @property
    def signature(self) -> Hashable:
        """Equal for GPUs that differ only in names: their options are the same."""
        return (tuple(u.kind for u in self.units), self.use, self.capacity)

    @property
    def counter_sets(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s for s, _ in self.counters if not s.startswith(EXCLUSIVE_SET)))

    def describe(self) -> str:
        """``counter set gpu-1-counter-set``, or the device of a GPU of one device."""
        sets = self.counter_sets
        return f"counter set {', '.join(sets)}" if sets else f"device {self.units[0].key}"


@dataclass(frozen=True)
class NodeDevices:
    """A node's devices grouped into GPUs, in canonical order."""

    gpus: tuple[Gpu, ...]

    def kinds(self) -> dict[Kind, int]:
        out: dict[Kind, int] = {}
        for g in self.gpus:
            for u in g.units:
                out[u.kind] = out.get(u.kind, 0) + 1
        return out

    def position(self) -> dict[str, int]:
        """Device key -> its place in the canonical order (GPU by GPU)."""
        return {u.key: i for i, u in enumerate(u for g in self.gpus for u in g.units)}


def node_of(units: Iterable[Unit], capacity: Mapping[CounterRef, Decimal]) -> NodeDevices:
    """The node's devices as GPUs: units sharing a counter set are one GPU; a GPU's full
    device (``uuid``) and its slices (``parent``) exclude each other."""
    units = list(units)
    children: dict[str, int] = {}
    for u in units:
        if u.parent is not None:
            children[u.parent] = children.get(u.parent, 0) + 1
    # a full device and its slices exclude each other by counters already when all of
    # them consume some; else (static MIG) by a counter of their own
    bare = {u.parent for u in units if u.parent is not None and not u.consumes}
    bare |= {u.uuid for u in units if u.uuid is not None and not u.consumes}
    uuids = {u.uuid for u in units if u.uuid is not None and u.uuid in bare}
    caps: dict[CounterRef, Decimal] = dict(capacity)
    linked: list[Unit] = []
    for u in units:
        extra: dict[CounterRef, Decimal] = {}
        if u.parent is not None and u.parent in uuids:
            extra[(EXCLUSIVE_SET + u.parent, "slices")] = Decimal(1)
        if u.uuid is not None and u.uuid in children and u.uuid in uuids:
            n = Decimal(children[u.uuid])
            extra[(EXCLUSIVE_SET + u.uuid, "slices")] = n
            caps[(EXCLUSIVE_SET + u.uuid, "slices")] = n
        if extra:
            u = replace(u, consumes={**u.consumes, **extra})
        linked.append(u)
    # connected groups by counter set (union-find over the sets a unit draws on)
    nat = _Natural()
    root: dict[str, str] = {}

    def find(s: str) -> str:
        while root.setdefault(s, s) != s:
            root[s] = root[root[s]]
            s = root[s]
        return s

    for u in linked:
        sets = {s for s, _ in u.consumes}
        if len(sets) > 1:
            first, *rest = sorted(sets)
            for s in rest:
                a, b = find(first), find(s)
                if a != b:
                    root[max(a, b)] = min(a, b)
    groups: dict[str, list[Unit]] = {}
    for u in linked:
        drawn = [s for (s, _), n in u.consumes.items() if n > 0]
        key = find(min(drawn)) if drawn else "\x00" + u.key
        groups.setdefault(key, []).append(u)
    gpus = [_gpu(members, caps, nat) for members in groups.values()]
    numbers = [[u.gpu for u in g.units if u.gpu is not None] for g in gpus]
    if all(numbers):  # every GPU's number published: by number, else by name
        pairs = zip(gpus, numbers, strict=True)
        order = {id(g): (min(n), nat[g.units[0].key]) for g, n in pairs}
    else:
        order = {id(g): (0, nat[g.units[0].key]) for g in gpus}
    gpus.sort(key=lambda g: order[id(g)])
    return NodeDevices(tuple(gpus))


def _gpu(members: list[Unit], capacity: Mapping[CounterRef, Decimal], nat: _Natural) -> Gpu:
    members.sort(key=nat.unit)
    counters: dict[CounterRef, int] = {}
    use: list[tuple[tuple[int, Amount], ...]] = []
    amounts: dict[Decimal, Amount] = {}
    for u in members:
        row = []
        for ref in sorted(u.consumes):
            n = u.consumes[ref]
            if n > 0:
                if n not in amounts:
                    amounts[n] = _amount(n)
                row.append((counters.setdefault(ref, len(counters)), amounts[n]))
        use.append(tuple(row))
    refs = tuple(counters)
    return Gpu(
        tuple(members),
        refs,
        tuple(_amount(capacity.get(r, Decimal(0))) for r in refs),
        tuple(use),
        any(not s.startswith(EXCLUSIVE_SET) for s, _ in refs),
    )


# --------------------------------------------------------------------------- per GPU
Vector = tuple[int, ...]


def _options(
    gpu: Gpu, kinds: Mapping[Kind, int], want: Vector, fixed: Sequence[int]
) -> dict[Vector, tuple[int, ...]]:
    """Each count vector (over ``kinds``) of a set of ``gpu``'s devices that fit its
    counters together, never more of a kind than ``want``, with the first such set (unit
    positions), every ``fixed`` unit in each. Counters of capacity 1 that every device
    takes whole (a GPU's memory slices) are bits of one mask; the others are summed."""
    binary = [
        c == 1 and all(n == 1 for row in gpu.use for i, n in row if i == b)
        for b, c in enumerate(gpu.capacity)
    ]
    bit = {c: 1 << k for k, c in enumerate(i for i, is_bit in enumerate(binary) if is_bit)}
    summed = {c: k for k, c in enumerate(i for i, is_bit in enumerate(binary) if not is_bit)}
    left = [gpu.capacity[c] for c in summed]
    shapes: list[tuple[int, tuple[tuple[int, Amount], ...]]] = []
    for row in gpu.use:
        mask = 0
        for c, _ in row:
            mask |= bit.get(c, 0)
        shapes.append((mask, tuple((summed[c], n) for c, n in row if c in summed)))
    used = 0
    counts = [0] * len(want)
    chosen: list[int] = []
    for j in fixed:
        k = kinds.get(gpu.units[j].kind)
        mask, rest = shapes[j]
        if k is None or used & mask or any(left[c] < n for c, n in rest):
            return {}
        used |= mask
        for c, n in rest:
            left[c] -= n
        counts[k] += 1
        chosen.append(j)
    if any(c > w for c, w in zip(counts, want, strict=True)):
        return {}
    free = [
        (j, kinds[u.kind], *shapes[j])
        for j, u in enumerate(gpu.units)
        if u.kind in kinds and j not in fixed
    ]
    out: dict[Vector, tuple[int, ...]] = {}
    seen: set[tuple[int, int, tuple[Amount, ...], Vector]] = set()

    def walk(start: int, used: int) -> None:
        vec = tuple(counts)
        if vec not in out:
            out[vec] = tuple(chosen)
        for p in range(start, len(free)):
            j, k, mask, rest = free[p]
            if counts[k] >= want[k] or used & mask:
                continue
            fits = True
            for c, n in rest:
                if left[c] < n:
                    fits = False
                    break
            if not fits:
                continue
            for c, n in rest:
                left[c] -= n
            counts[k] += 1
            state = (p, used | mask, tuple(left), tuple(counts))
            if state not in seen:
                seen.add(state)
                chosen.append(j)
                walk(p + 1, used | mask)
                chosen.pop()
            counts[k] -= 1
            for c, n in rest:
                left[c] += n

    walk(0, used)
    return out


# --------------------------------------------------------------------------- across GPUs
@dataclass(frozen=True)
class Packing:
    """Per kind, the devices (keys) of Slurm's layout, in canonical (GPU, placement) order:
    Slurm's ``k``-th device of a kind is ``devices[kind][k]``."""

    devices: Mapping[Kind, tuple[str, ...]]

    def keys(self) -> set[str]:
        return {k for keys in self.devices.values() for k in keys}


@dataclass(frozen=True)
class Unpackable:
    """No packing: per kind how many of Slurm's devices could not be placed, and why."""

    short: Mapping[Kind, int]
    reasons: tuple[str, ...]

    def __str__(self) -> str:
        return "; ".join(self.reasons)


Resource = tuple[tuple[Amount, ...], Amount]  # per kind the least a device takes; the capacity


def _resources(gpu: Gpu, kinds: Mapping[Kind, int]) -> list[Resource]:
    """What bounds how many devices of each kind one GPU holds together: per counter, the
    least a device of each kind consumes of it, and the counter's capacity; and the same
    of the GPU's binary counters (memory slices) counted together."""
    width = len(kinds)
    binary = [
        c == 1 and all(n == 1 for row in gpu.use for i, n in row if i == b)
        for b, c in enumerate(gpu.capacity)
    ]
    out: list[Resource] = []
    for c, cap in enumerate(gpu.capacity):
        if binary[c]:
            continue
        least: list[Amount | None] = [None] * width
        for u, row in zip(gpu.units, gpu.use, strict=True):
            k = kinds.get(u.kind)
            if k is not None:
                n = next((n for i, n in row if i == c), 0)
                least[k] = n if least[k] is None else min(least[k], n)  # type: ignore[type-var]
        weights = tuple(0 if n is None else n for n in least)
        if any(weights):
            out.append((weights, cap))
    bits: list[int | None] = [None] * width
    for u, row in zip(gpu.units, gpu.use, strict=True):
        k = kinds.get(u.kind)
        if k is not None:
            n = sum(1 for i, _ in row if binary[i])
            bits[k] = n if bits[k] is None else min(n, bits[k])  # type: ignore[type-var]
    weights = tuple(0 if n is None else n for n in bits)
    if any(weights):
        out.append((weights, sum(binary)))
    return out


def _search(
    options: list[list[tuple[Vector, tuple[int, ...]]]],
    bounds: list[list[Resource] | None],
    want: Vector,
) -> list[int] | None:
    """Which option of each GPU, together exactly ``want`` (None: no such choice). A
    state is (GPU, what is left to place): the states that failed are remembered.
    ``bounds[s]``: when GPUs s.. are all alike, what one of them holds at most, so that
    ``len(GPUs s..)`` times it bounds what is left."""
    n = len(options)
    width = len(want)
    room = [[0] * width for _ in range(n + 1)]  # what GPUs s.. can hold at most, per kind
    for s in range(n - 1, -1, -1):
        best = [max((v[k] for v, _ in options[s]), default=0) for k in range(width)]
        room[s] = [room[s + 1][k] + best[k] for k in range(width)]
    failed: set[tuple[int, Vector]] = set()
    choice = [0] * n

    def place(s: int, rem: Vector) -> bool:
        if s == n:
            return not any(rem)
        if any(r > m for r, m in zip(rem, room[s], strict=True)):
            return False
        if (s, rem) in failed:
            return False
        alike = bounds[s]
        if alike is not None:
            for weights, cap in alike:
                if sum(r * w for r, w in zip(rem, weights, strict=True)) > (n - s) * cap:
                    failed.add((s, rem))
                    return False
        for i, (vec, _) in enumerate(options[s]):
            if any(v > r for v, r in zip(vec, rem, strict=True)):
                continue
            choice[s] = i
            if place(s + 1, tuple(r - v for r, v in zip(rem, vec, strict=True))):
                return True
        failed.add((s, rem))
        return False

    return list(choice) if place(0, want) else None


def _rank(vec: Vector) -> Vector:
    """Most of the layout's first kind first, then of the next...: the first GPUs take
    the kinds Slurm lists first, as gres.conf lists a node's instances GPU by GPU."""
    return tuple(-v for v in vec)


def pack(
    node: NodeDevices,
    want: Mapping[Kind, int],
    *,
    fixed: Iterable[str] = (),
    every_gpu: bool = False,
) -> Packing | Unpackable:
    """Slurm's layout ``want`` (kind -> count, in Slurm's order) on ``node``'s devices,
    with every ``fixed`` device in it; ``every_gpu``: each GPU takes at least one device
    (a device that shares no counters is a GPU of its own)."""
    want = {k: n for k, n in want.items() if n > 0}
    found = _pack(node, want, set(fixed), every_gpu)
    return found if found is not None else _unpackable(node, want, set(fixed), every_gpu)


def _pack(
    node: NodeDevices, want: Mapping[Kind, int], fixed: set[str], every_gpu: bool
) -> Packing | None:
    kinds = {k: i for i, k in enumerate(want)}
    target = tuple(want.values())
    if len(fixed) != sum(1 for g in node.gpus for u in g.units if u.key in fixed):
        return None  # a fixed device the node does not have
    memo: dict[Hashable, list[tuple[Vector, tuple[int, ...]]]] = {}
    keys: list[Hashable] = []
    for g in node.gpus:
        pinned = tuple(j for j, u in enumerate(g.units) if u.key in fixed)
        key = (g.signature, pinned)
        if key not in memo:
            found = _options(g, kinds, target, pinned)
            opts = sorted(found.items(), key=lambda o: _rank(o[0]))
            if every_gpu:
                opts = [o for o in opts if any(o[0])]
            memo[key] = opts
        keys.append(key)
    # alike GPUs searched together, the largest group last (its levels are bounded)
    size = {k: keys.count(k) for k in keys}
    first = {k: keys.index(k) for k in reversed(keys)}
    order = sorted(range(len(keys)), key=lambda i: (size[keys[i]], first[keys[i]], i))
    bound_of = {k: _resources(node.gpus[first[k]], kinds) for k in size}
    last = keys[order[-1]] if order else None
    bounds: list[list[Resource] | None] = []
    for pos in range(len(order)):
        alike = all(keys[j] == last for j in order[pos:])
        bounds.append(bound_of[last] if alike and last is not None else None)
    picked = _search([memo[keys[i]] for i in order], bounds, target)
    if picked is None:
        return None
    choice = [0] * len(keys)
    for pos, i in enumerate(order):
        choice[i] = picked[pos]
    options = [memo[k] for k in keys]
    out: dict[Kind, list[str]] = {k: [] for k in want}
    for g, opts, i in zip(node.gpus, options, choice, strict=True):
        for j in opts[i][1]:
            out[g.units[j].kind].append(g.units[j].key)
    return Packing({k: tuple(v) for k, v in out.items()})


def _unpackable(
    node: NodeDevices, want: Mapping[Kind, int], fixed: set[str], every_gpu: bool
) -> Unpackable:
    """Why ``want`` does not pack: each kind in Slurm's order, as many of it as fit beside
    the kinds before it (a binary search: fewer of a kind never fit worse)."""
    have = node.kinds()
    short: dict[Kind, int] = {}
    reasons: list[str] = []
    fits: dict[Kind, int] = {}
    for kind, n in want.items():
        if have.get(kind, 0) < n:
            short[kind] = n - have.get(kind, 0)
            reasons.append(f"{kind}: {n} wanted, the node has {have.get(kind, 0)} such device(s)")
            fits[kind] = have.get(kind, 0)
            continue
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if _pack(node, {**fits, kind: mid}, set(), False) is not None:
                lo = mid
            else:
                hi = mid - 1
        fits[kind] = lo
        if lo < n:
            short[kind] = n - lo
            reasons.append(
                f"{kind}: {n} wanted, only {lo} fit the GPUs' counters together with the "
                f"kinds before it{_blocking(node, {**fits}, kind)}"
            )
    if not short:
        if fixed and _pack(node, want, set(), every_gpu) is not None:
            reasons.append(
                "the devices held already cannot be part of a packing of the whole layout"
            )
        elif every_gpu:
            reasons.append("no packing of the layout uses every GPU")
        else:
            reasons.append("the layout does not fit the GPUs' counters")
    return Unpackable(short, tuple(reasons))


def _blocking(node: NodeDevices, fits: Mapping[Kind, int], kind: Kind) -> str:
    """Where the next device of ``kind`` does not fit, in the packing of ``fits``: per
    GPU, the first counter its first device of the kind finds used up."""
    found = _pack(node, fits, set(), False)
    if found is None:
        return ""
    used = found.keys()
    out: list[str] = []
    for g in node.gpus:
        left = list(g.capacity)
        for j, u in enumerate(g.units):
            if u.key in used:
                for c, n in g.use[j]:
                    left[c] -= n
        for j, u in enumerate(g.units):
            if u.kind != kind or u.key in used:
                continue
            for c, n in g.use[j]:
                if left[c] < n:
                    s, name = g.counters[c]
                    out.append(f"{s}/{name}" if not s.startswith(EXCLUSIVE_SET) else s)
                    break
            break
    return f" (used up: {', '.join(dict.fromkeys(out))})" if out else ""


def first_fit(node: NodeDevices) -> dict[Kind, int]:
    """Per GPU, each device in canonical order that still fits beside those taken before
    it (a GPU's full device before its slices; static slices, without a full device, all):
    what an external node registers. Every result packs (it is one of the GPU's sets)."""
    out: dict[Kind, int] = {}
    for g in node.gpus:
        left = list(g.capacity)
        for j, u in enumerate(g.units):
            if all(left[c] >= n for c, n in g.use[j]):
                for c, n in g.use[j]:
                    left[c] -= n
                out[u.kind] = out.get(u.kind, 0) + 1
    return out
