"""Test helper: re-exports :mod:`bridge.sandbox.workloads` (the pods a workload's
controllers would create), shared by the translation tests and the demo."""

from bridge.sandbox.workloads import EXAMPLES, Expanded, Obj, expand, load_example, uid_for

__all__ = ["EXAMPLES", "Expanded", "Obj", "expand", "load_example", "uid_for"]
