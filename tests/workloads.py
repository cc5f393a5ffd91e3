"""Test helper: re-exports :mod:`sandbox.controllers.workload_pods` (the pods a workload's
controllers would create), shared by the translation tests and the demo; and a pod naming
a built-in PodGroup (:func:`member_pod`)."""

from typing import Any

from sandbox.controllers.workload_pods import EXAMPLES, Expanded, Obj, expand, load_example, uid_for

__all__ = ["EXAMPLES", "Expanded", "Obj", "expand", "load_example", "member_pod", "uid_for"]


def member_pod(name: str, pg: str, cpu: str = "1", gpus: int = 0) -> dict[str, Any]:
    """A pod of namespace ``ns`` naming the built-in PodGroup ``pg``
    (``spec.schedulingGroup``), asking ``cpu`` and ``gpus`` GPUs."""
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {
            "schedulingGroup": {"podGroupName": pg},
            "containers": [
                {
                    "name": "c",
                    "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}, "limits": limits},
                }
            ],
        },
    }
