"""Issue #39, deliverables 6 and 7 (second half): a claim's CEL selectors are tenant text
evaluated on the scheduler's loop. Each is compiled once with its regexes, estimated like
Kubernetes estimates it, and matched against the cluster's devices under a budget counted
in CEL cost units (never a clock): over it, the request is refused naming the expression.
Devices that agree on what the selectors read are evaluated once, and a resolution (a
refusal too) is kept with its cost while the slices do not change. A ResourceSlice of a
node the bridge does not schedule on (forged) does not count."""

from __future__ import annotations

from typing import Any, cast

import pytest

import bridge.cel as cel
from bridge.config import DEFAULT_GRES_MAPPING
from bridge.errors import InvalidInput
from bridge.kube.client import KubeClient
from bridge.slurm.client import SlurmClient
from bridge.translate import selectors as selectors_mod
from bridge.translate.dra import DraInputs, pod_devices
from bridge.translate.selectors import BUDGET, MAX_COST, MAX_LENGTH, device_variable
from sandbox.controllers import dra_driver
from scheduler.dra import DEVICE_CLASSES, RESOURCE_SLICES, DraAllocator

DRIVER = "gpu.nvidia.com"
CLASSES = {c["metadata"]["name"]: c for c in dra_driver.device_classes()}
SLICES = dra_driver.mig_slices("n1", 1, full_gpus=1)
UUID = f'device.attributes["{DRIVER}"].uuid != ""'
BIG = [s for n in range(300) for s in dra_driver.mig_slices(f"n{n}", 1, full_gpus=1)]


def largest(i: int) -> str:
    """One of the largest selectors a 1.36 API server accepts: 250 matches() (under 10 KiB,
    estimated far under its 1,000,000), reading each device's own uuid so that no two
    devices evaluate alike."""
    return " && ".join([UUID, *([f'device.driver.matches("^gpu|x{i % 10}")'] * 249)])


def mid(i: int) -> str:
    """A selector that fits the budget alone (30 matches())."""
    return " && ".join([UUID, *([f'device.driver.matches("^gpu|x{i}")'] * 30)])


def claim(requests: list[list[str]], cls: str = "gpu.nvidia.com") -> dict[str, Any]:
    return {
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": f"r{k}",
                        "exactly": {
                            "deviceClassName": cls,
                            "selectors": [{"cel": {"expression": e}} for e in sels],
                        },
                    }
                    for k, sels in enumerate(requests)
                ]
            }
        },
    }


def pod(name: str = "p", claim_name: str = "c") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "containers": [{"name": "c"}],
            "resourceClaims": [{"name": "g", "resourceClaimName": claim_name}],
        },
    }


def inputs(claims: dict[str, Any], **kw: Any) -> DraInputs:
    base: dict[str, Any] = {
        "classes": CLASSES,
        "claims": claims,
        "device_class_gres": {DRIVER: "gpu"},
        "gres_mapping": DEFAULT_GRES_MAPPING,
        "slices": SLICES,
    }
    return DraInputs(**{**base, **kw})


def test_the_largest_selectors_one_claim_may_carry_are_refused_over_budget_naming_one() -> None:
    # 8 requests x 16 selectors x 250 matches(): ran for seconds a pod on the loop
    requests = [[largest(16 * k + j) for j in range(16)] for k in range(8)]
    assert all(len(e) <= MAX_LENGTH for r in requests for e in r)
    with pytest.raises(InvalidInput) as e:
        pod_devices(pod(), inputs({"c": claim(requests)}))
    msg = str(e.value)
    assert f"budget of {BUDGET} units" in msg
    # compiling one costs some 20 ms: refused before it is compiled (its characters and
    # tokens are counted first)
    assert 'request "r0": spec.devices.requests[0].exactly.selectors[0].cel.expression' in msg
    assert ": CEL: compiling the group's selectors and matching them" in msg


def test_a_matches_pattern_is_compiled_once_however_many_devices_and_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compiled: list[bytes] = []
    real = cel._re2.RE2

    def counting(pattern: bytes, options: Any) -> Any:
        compiled.append(pattern)
        return real(pattern, options)

    counting.Options = real.Options  # type: ignore[attr-defined]
    monkeypatch.setattr(cel._re2, "RE2", counting)
    cel._regexes.clear()
    expr = cel.compile_expression(
        " && ".join(['device.driver.matches("^gpu[.]nvidia[.]com$")'] * 20)
    )
    for i in range(50):
        assert expr.evaluate_bool({"device": {"driver": "gpu.nvidia.com", "n": i}})
    assert compiled == [b"^gpu[.]nvidia[.]com$"]


@pytest.mark.parametrize(
    ("source", "want"),
    [
        ('device.driver.matches("^a") && "x".matches("(?<=x)")', True),  # RE2: no lookbehind
        ('matches(device.driver, "nvidia") && device.driver.matches("^gpu")', False),
        ('"matches(" == "matches(" && device.driver.matches("com$")', False),
    ],
)
def test_matches_is_re2_in_both_call_forms_and_text_in_strings_is_left_alone(
    source: str, want: bool
) -> None:
    expr = cel.compile_expression(source)
    if want:  # an invalid pattern is an evaluation error, as in Kubernetes
        with pytest.raises(cel.CelError, match="invalid regex"):
            expr.evaluate_bool({"device": {"driver": "a"}})
    else:
        assert expr.evaluate_bool({"device": {"driver": "gpu.nvidia.com"}})


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        (
            "device.attributes.all(d, device.attributes[d].all(a, device.attributes.all(e, "
            f'device.attributes[e].all(b, device.attributes["{DRIVER}"].uuid.matches(a + b)))))',
            "too complex: estimated cost ",
        ),
        ("true || " * 1300 + "true", f"longer than {MAX_LENGTH} characters"),
    ],
    ids=["nested-comprehensions", "too-long"],
)
def test_a_selector_the_api_server_would_refuse_as_too_costly_is_refused(
    expression: str, why: str
) -> None:
    with pytest.raises(InvalidInput) as e:
        pod_devices(pod(), inputs({"c": claim([[expression]])}))
    assert "spec.devices.requests[0].exactly.selectors[0].cel.expression: CEL: " in str(e.value)
    assert why in str(e.value)
    if "complex" in why:
        assert f"exceeds the limit {MAX_COST}" in str(e.value)


def test_devices_alike_in_what_the_selectors_read_are_evaluated_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a MIG claim over a big cluster: a few distinct (type, profile), not every device;
    # and at allocation its node's devices are not evaluated again
    calls: list[int] = []
    real = selectors_mod._evaluate

    def counting(*a: Any) -> bool:
        calls.append(1)
        return real(*a)

    monkeypatch.setattr(selectors_mod, "_evaluate", counting)
    selector = [f'device.attributes["{DRIVER}"].profile == "1g.10gb"']
    got = pod_devices(pod(), inputs({"c": claim([selector], "mig.nvidia.com")}, slices=BIG))
    (r,) = got.requests
    assert r.profile == "1g.10gb"
    resolved = len(calls)
    assert resolved < 10  # of 4,500 devices on 300 nodes
    node = [d for s in BIG[:2] for d in s["spec"].get("devices", [])]
    picked = [d for d in node if selectors_mod.matches(r.selectors, device_variable(DRIVER, d))]
    assert len(picked) == sum(
        1 for d in node if d["attributes"].get("profile", {}).get("string") == "1g.10gb"
    )
    assert len(calls) == resolved


def test_a_refused_resolution_is_kept_with_its_cost_and_never_evaluated_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # short enough to compile, but matched against 600 GPUs of distinct uuids
    selector = " && ".join([UUID] + ['device.driver.matches("^gpu")'] * 10)
    requests = [[selector]]
    memo: dict[Any, Any] = {}
    with pytest.raises(InvalidInput, match="costs more than the bridge's budget") as first:
        pod_devices(pod(), inputs({"c": claim(requests)}, kinds=memo, slices=BIG))
    monkeypatch.setattr(selectors_mod, "_evaluate", lambda *a: pytest.fail("evaluated again"))
    with pytest.raises(InvalidInput, match="costs more than the bridge's budget") as again:
        pod_devices(pod(), inputs({"c": claim(requests)}, kinds=memo, slices=BIG))
    assert str(again.value) == str(first.value)
    assert "spec.devices.requests[0].exactly.selectors[0].cel.expression" in str(first.value)


def test_one_groups_requests_share_one_budget_even_when_each_fits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # each claim's selectors fit the budget alone; a gang naming many distinct ones does not
    claims = {f"c{i}": claim([[mid(i)]]) for i in range(40)}
    one = inputs(claims)
    pod_devices(pod("p0", "c0"), one)
    assert 0 < one.budget.spent <= BUDGET
    group = inputs(claims)
    refused: list[str] = []
    for i in range(40):
        try:
            pod_devices(pod(f"p{i}", f"c{i}"), group)
        except InvalidInput as e:
            refused.append(str(e))
    assert refused
    assert f"costs more than the bridge's budget of {BUDGET} units" in refused[0]


# ------------------------------------------------------- deliverable 7: forged slices
def forged_slice() -> dict[str, Any]:
    (s, _) = dra_driver.mig_slices("ghost", 1, full_gpus=0)
    s = {**s, "metadata": {"name": "forged", "resourceVersion": "1"}}
    for d in s["spec"]["devices"]:  # a profile nothing else publishes
        d["attributes"] = {**d["attributes"], "type": {"string": "mig"}}
        d["attributes"]["profile"] = {"string": "1g.5gb"}
    return s


def test_a_forged_slice_for_a_node_the_bridge_does_not_schedule_on_is_ignored() -> None:
    # the MIG claims of the cluster matched two profiles, 1g.10gb and the forged one: refused
    cls_only = claim([[]], "mig.nvidia.com")
    cls_only["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": f'device.attributes["{DRIVER}"].profile in ["1g.10gb", "1g.5gb"]'}}
    ]
    dra = DraAllocator(
        cast(KubeClient, object()),
        cast(SlurmClient, object()),
        device_class_gres={DRIVER: "gpu"},
        gres_mapping=DEFAULT_GRES_MAPPING,
        node_ok=lambda node: node == "n1",
    )
    for c in CLASSES.values():
        dra.cache.on_class_event("ADDED", c)
    for s in [*SLICES, forged_slice()]:
        dra.cache.on_slice_event("ADDED", s)
    dra.cache.on_claim_event("ADDED", {**cls_only, "metadata": {"name": "c", "namespace": "ns"}})
    for res in (DEVICE_CLASSES, RESOURCE_SLICES):
        dra.cache.listed(res)
    got = dra.inputs([pod()])
    assert got is not None
    assert {s["spec"]["nodeName"] for s in got.slices} == {"n1"}
    (r,) = pod_devices(pod(), got).requests
    assert r.profile == "1g.10gb"


def test_the_scheduler_counts_slices_of_nodes_it_schedules_on_only() -> None:
    from bridge.config import parse_config
    from bridge.wellknown import LABEL_EXTERNAL_NODE, MANAGED_NODE_TAINT
    from scheduler.cycle import Scheduler
    from tests.fake_clock import FakeClock

    cfg = parse_config({"managedNamespaces": ["ns"]}, env={})
    sched = Scheduler(cfg, cast(KubeClient, None), cast(SlurmClient, None), FakeClock())
    ok = sched.dra.node_ok
    assert ok is not None
    for name, labels, taints in (
        ("slurm-1", {}, []),
        ("k8s-only", {}, []),
        ("to-register", {LABEL_EXTERNAL_NODE: "true"}, []),
        ("tainted", {}, [{"key": MANAGED_NODE_TAINT, "effect": "NoExecute"}]),
    ):
        node = {"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints}}
        sched.state.on_node_event("ADDED", node)
    names = ("slurm-1", "k8s-only", "to-register", "tainted", "ghost")
    # before Slurm's nodes are read: every node that exists, never one that does not
    assert [n for n in names if ok(n)] == ["slurm-1", "k8s-only", "to-register", "tainted"]
    sched.slurm_state.slurm_nodes = frozenset({"slurm-1"})
    assert [n for n in names if ok(n)] == ["slurm-1", "to-register", "tainted"]
