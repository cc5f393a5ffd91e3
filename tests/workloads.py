"""Test helper: re-exports :mod:`sandbox.controllers.workload_pods` (the pods a workload's
controllers would create), shared by the translation tests and the demo."""

from sandbox.controllers.workload_pods import EXAMPLES, Expanded, Obj, expand, load_example, uid_for

__all__ = ["EXAMPLES", "Expanded", "Obj", "expand", "load_example", "uid_for"]
