"""The scheduler's Prometheus metrics, in a registry of their own (no global state)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
# How far ahead an expected start is, and how far off it was (seconds): 10 s to a day.
_AHEAD_BUCKETS = (10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.attempts = Counter(
            "slurm_bridge_scheduling_attempts",
            "Scheduling cycles run for a group, by decision",
            ["decision"],
            registry=r,
        )
        self.pending_pods = Gauge(
            "slurm_bridge_pending_pods",
            "Unbound managed pods, by the reason they wait",
            ["reason"],
            registry=r,
        )
        self.submit_seconds = Histogram(
            "slurm_bridge_submit_seconds",
            "Time to submit one placeholder job to slurmrestd",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.bind_seconds = Histogram(
            "slurm_bridge_bind_seconds",
            "Time from a pod entering the scheduler's cache to its binding",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.rest_errors = Counter(
            "slurm_bridge_slurm_rest_errors",
            "slurmrestd errors by endpoint and HTTP status (0 = no answer)",
            ["endpoint", "status"],
            registry=r,
        )
        self.kube_errors = Counter(
            "slurm_bridge_kube_errors",
            "Kubernetes API errors by operation and reason",
            ["operation", "reason"],
            registry=r,
        )
        self.jobs_submitted = Counter(
            "slurm_bridge_jobs_submitted", "Placeholder jobs submitted", registry=r
        )
        self.hetjobs_submitted = Counter(
            "slurm_bridge_hetjobs_submitted",
            "Heterogeneous placeholder jobs submitted (gangs of several shapes; each is "
            "also one of slurm_bridge_jobs_submitted)",
            registry=r,
        )
        self.hetjob_components_submitted = Counter(
            "slurm_bridge_hetjob_components_submitted",
            "Components of the heterogeneous jobs submitted",
            registry=r,
        )
        self.jobs_allocated = Counter(
            "slurm_bridge_jobs_allocated",
            "Placeholder jobs started at once (job/allocate, immediate)",
            registry=r,
        )
        self.allocations_refused = Counter(
            "slurm_bridge_allocations_refused",
            "Immediate allocations Slurm refused (each leaves a FAILED job record)",
            registry=r,
        )
        self.expected_start_seconds = Histogram(
            "slurm_bridge_expected_start_seconds",
            "How far ahead Slurm's planned start of a group's pending job was when its "
            "pods were first shown it",
            buckets=_AHEAD_BUCKETS,
            registry=r,
        )
        self.expected_start_error_seconds = Histogram(
            "slurm_bridge_expected_start_error_seconds",
            "How far a group's job started from the expected start its pods were first "
            "shown (absolute, at start)",
            buckets=_AHEAD_BUCKETS,
            registry=r,
        )
        self.pods_bound = Counter("slurm_bridge_pods_bound", "Pods bound", registry=r)
        self.device_mismatches = Counter(
            "slurm_bridge_device_mismatches",
            "Jobs given back because Slurm's devices and a node's ResourceSlices disagree "
            "(the node is then excluded for the group until its slices change)",
            registry=r,
        )
        self.loop_failures = Counter(
            "slurm_bridge_loop_failures",
            "Steps of a worker or forever-loop that raised (logged, then backed off), by loop",
            ["loop"],
            registry=r,
        )

    def loop_failed(self, loop: str) -> None:
        self.loop_failures.labels(loop).inc()
