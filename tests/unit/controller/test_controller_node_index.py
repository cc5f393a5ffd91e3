"""The controller's pods-by-node index: a node event queues the jobs of the pods bound to
that node only (it used to scan every pod per node event: O(pods x nodes) at start-up),
and the index follows pods that move, leave or are deleted. Clients are never called."""

from __future__ import annotations

from typing import Any, cast

from bridge.config import parse_config
from bridge.kube.client import KubeClient
from bridge.kube.watch import WatchEvent
from bridge.slurm.client import SlurmClient
from bridge.wellknown import LABEL_JOB_ID
from controller.runtime import Controller


def pod(name: str, job: int, node: str = "") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": name,
            "labels": {LABEL_JOB_ID: str(job)},
        },
        "spec": {"nodeName": node} if node else {},
    }


def node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {}}


async def drain(ctl: Controller) -> list[tuple[str, str]]:
    """The keys queued, in order, each taken and marked done as a worker would."""
    out = []
    while len(ctl.queue):
        key = await ctl.queue.get()
        assert key is not None
        ctl.queue.done(key)
        out.append(key)
    return out


async def test_a_node_event_queues_the_jobs_of_the_pods_on_that_node_only() -> None:
    ctl = Controller(parse_config({}), cast(SlurmClient, None), cast(KubeClient, None))
    for ev in (pod("a", 1, "n1"), pod("b", 2, "n2"), pod("c", 3)):
        await ctl.on_pod(WatchEvent("ADDED", ev))
    await drain(ctl)

    await ctl.on_node(WatchEvent("MODIFIED", node("n1")))
    assert await drain(ctl) == [("node", "n1"), ("job", "1")]

    await ctl.on_pod(WatchEvent("MODIFIED", pod("b", 2, "n1")))  # moved (re-created) to n1
    await ctl.on_pod(WatchEvent("DELETED", pod("a", 1, "n1")))
    await drain(ctl)
    await ctl.on_node(WatchEvent("MODIFIED", node("n1")))
    assert await drain(ctl) == [("node", "n1"), ("job", "2")]
    await ctl.on_node(WatchEvent("MODIFIED", node("n2")))
    assert await drain(ctl) == [("node", "n2")]
    assert ctl.caches.by_node == {"n1": {"ns/b"}}
