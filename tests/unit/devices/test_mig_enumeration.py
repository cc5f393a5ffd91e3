"""Proof by enumeration (issue #40): every MIG configuration a user can cut, on every GPU
model of the table, packs, the GRES condition is True, and Slurm-style jobs replayed on
the node (Slurm's ``IDX``, and counts only) each get a device of their profile, never
over a counter, never twice, never given back.

The configurations come from NVIDIA's placement table by brute force, apart from the
packer (tests/bench/mig_layouts.py ``gpu_configs``). By default a share of each set runs
(a few seconds on 2 cores); ``SLURM_BRIDGE_MIG_ENUMERATION=full`` runs all of it: every
node of 1 and 2 GPUs of every model under every publication form, and 500 sampled nodes
of up to 8 GPUs, each replayed.
"""

from __future__ import annotations

import itertools
import os
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.devices.mig import NVIDIA_MIG_GPUS, MigGpu, nvidia_mig_gpu
from tests.bench.mig_layouts import (
    FORMS,
    Node,
    Tally,
    check_packs,
    every_node,
    gpu_configs,
    random_node,
    replay,
)

FULL = os.environ.get("SLURM_BRIDGE_MIG_ENUMERATION") == "full"
MODELS = [pytest.param(m, id=m.model) for m in NVIDIA_MIG_GPUS]


def assert_ok(tally: Tally) -> None:
    assert tally.ok, tally.failures
    assert tally.packing_ms or tally.jobs  # something was checked


def test_the_table_gives_nvidias_configurations() -> None:
    a100 = gpu_configs(nvidia_mig_gpu("A100-80GB"))
    names = {"+".join(sorted(p for p, _ in c)) for c in a100}
    # NVIDIA's documented ones, among them the balanced layout and seven 1g
    assert "1g.10gb+1g.10gb+2g.20gb+3g.40gb" in names
    assert "+".join(["1g.10gb"] * 7) in names
    assert "3g.40gb+4g.40gb" in names
    assert "1g.20gb+1g.20gb+1g.20gb+1g.20gb" in names
    assert "3g.40gb+3g.40gb+1g.10gb" not in names  # 9 memory slices
    assert "4g.40gb+4g.40gb" not in names  # 8 compute slices
    assert len(gpu_configs(nvidia_mig_gpu("A30-24GB"))) == 9


@pytest.mark.parametrize("model", MODELS)
def test_every_configuration_of_one_gpu_packs_under_every_form(model: MigGpu) -> None:
    tally = Tally()
    forms = list(FORMS)
    for i, config in enumerate(gpu_configs(model)):
        for form in forms if FULL else [forms[i % len(forms)]]:
            tally.nodes += 1
            check_packs(Node(model, (config,), form=form), tally)
    assert_ok(tally)


@pytest.mark.parametrize("model", MODELS)
def test_every_node_of_two_gpus_packs(model: MigGpu) -> None:
    tally = Tally()
    forms = list(FORMS)
    nodes = list(every_node(model, 2))
    if not FULL:
        nodes = random.Random(model.model).sample(nodes, min(len(nodes), 12))
    for i, gpus in enumerate(nodes):
        for form in forms if FULL else [forms[i % len(forms)]]:
            tally.nodes += 1
            check_packs(Node(model, gpus, form=form), tally)
    assert_ok(tally)


@pytest.mark.parametrize("model", MODELS)
def test_jobs_replayed_on_nodes_of_one_and_two_gpus_fit(model: MigGpu) -> None:
    tally = Tally()
    singles = [(c,) for c in gpu_configs(model)]
    pairs = list(every_node(model, 2))
    nodes = singles + pairs
    if not FULL:
        rng = random.Random(model.model)
        nodes = rng.sample(singles, min(3, len(singles))) + rng.sample(pairs, 2)
    forms = itertools.cycle(FORMS)
    for i, gpus in enumerate(nodes):
        node = Node(model, gpus, form=next(forms))
        tally.nodes += 1
        replay(node, i, 40, tally, indexed=True)
        replay(node, i, 40, tally, indexed=False)
    assert_ok(tally)


@settings(max_examples=500 if FULL else 8, deadline=None, derandomize=True)
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_sampled_nodes_of_up_to_8_gpus_pack_and_replay_without_a_fault(seed: int) -> None:
    node = random_node(random.Random(seed))
    tally = Tally(nodes=1)
    check_packs(node, tally)
    replay(node, seed, 60 if FULL else 25, tally, indexed=True)
    replay(node, seed, 60 if FULL else 25, tally, indexed=False)
    assert_ok(tally)
