"""The paired benchmark's plumbing (tests/bench/paired.py, tests/bench/scheduler.py), pure:
which options an older commit's bench is given, and how the gang's API requests are
counted. The figures themselves are never asserted (shared, noisy machines)."""

from __future__ import annotations

from pathlib import Path

from sandbox.kubeapi.faults import LoggedRequest
from tests.bench.paired import known_args
from tests.bench.scheduler import request_kind


def test_an_older_bench_is_not_given_the_options_it_lacks(tmp_path: Path) -> None:
    bench = tmp_path / "tests" / "bench" / "scheduler.py"
    bench.parent.mkdir(parents=True)
    bench.write_text('ap.add_argument("--pods")\nap.add_argument("--gang-reps")\n')
    args = [
        "--pods", "10", "--gang-reps", "5", "--scheduler-identity", "admin",
        "--api-server=bare", "--pending", "3",
    ]  # fmt: skip
    assert known_args(tmp_path, args) == ["--pods", "10", "--gang-reps", "5", "--pending", "3"]


def test_a_request_is_counted_by_verb_resource_subresource_and_status() -> None:
    def kind(method: str, path: str, status: int = 200, query: str = "") -> str:
        return request_kind(LoggedRequest(method, path, query, status))

    ns = "/api/v1/namespaces/slurm-bridge"
    assert kind("POST", f"{ns}/pods", 201) == "POST pods 201"
    assert kind("PATCH", f"{ns}/pods/gang-7") == "PATCH pods 200"
    assert kind("POST", f"{ns}/pods/gang-7/binding", 201) == "POST pods/binding 201"
    assert kind("PATCH", f"{ns}/pods/gang-7/status") == "PATCH pods/status 200"
    events = "/apis/events.k8s.io/v1/namespaces/slurm-bridge/events"
    assert kind("POST", events, 403) == "POST events 403"
    group = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/slurm-bridge/podgroups/gang"
    assert kind("GET", group) == "GET podgroups 200"
    assert kind("GET", "/api/v1/pods", query="watch=1") == "GET watch pods 200"
    assert kind("GET", "/api/v1/namespaces/slurm-bridge") == "GET namespaces 200"
    assert kind("GET", "/api/v1/nodes/kube-node-0") == "GET nodes 200"
