"""Sandbox-only annotations a test puts on its objects to steer the sandbox's stand-ins
(no imports: any test or benchmark may import it first)."""

from __future__ import annotations

# On a pod: its containers ignore SIGTERM; the kubelet stand-in kills them (exit 137)
# only when the grace period ends ("containers still running" for tests of teardown).
IGNORE_SIGTERM = "sandbox.slurm-bridge.dev/ignore-sigterm"
