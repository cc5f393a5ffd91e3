"""Prometheus metrics of the webhook, in a registry of their own (no global state).

Every label value comes from a fixed set: what a request says (its kind, its operation) is
mapped onto the values below, anything else counts as ``other``. A label copied from the
request would let any client grow the registry (and /metrics) without bound.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from bridge.workloads import POD, object_apis

ENDPOINTS = frozenset({"mutate", "validate", "placement"})
# the kinds of the objects the webhook reviews: the workload kinds' (bridge.workloads)
KINDS = frozenset({POD.api.kind} | {api.kind for api in object_apis()})
OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})
RESULTS = frozenset(
    {"allowed", "patched", "denied", "error", "bad_request", "too_large", "unsupported_media"}
)
OTHER = "other"


def bounded(value: str, allowed: frozenset[str]) -> str:
    """``value`` when it is one of ``allowed``; ``""`` stays ``""``; else ``other``."""
    return value if not value or value in allowed else OTHER


class AdmissionMetrics:
    """``slurm_bridge_admission_reviews_total`` and ``..._review_seconds``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.reviews = Counter(
            "slurm_bridge_admission_reviews",
            "AdmissionReviews answered, by endpoint, object kind, operation and result "
            "(allowed, patched, denied, error, bad_request, too_large, unsupported_media); "
            "kinds other than the bridge's own and unknown values count as 'other'.",
            ["endpoint", "kind", "operation", "result"],
            registry=self.registry,
        )
        self.loop_failures = Counter(
            "slurm_bridge_loop_failures",
            "Steps of a forever-loop that raised (logged, then backed off), by loop",
            ["loop"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "slurm_bridge_admission_review_seconds",
            "Seconds the webhook spent on one AdmissionReview, by endpoint: from its "
            "headers to its answer encoded (the body read, decoded, decided); TLS and the "
            "network are not in it.",
            ["endpoint"],
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0),
            registry=self.registry,
        )

    def loop_failed(self, loop: str) -> None:
        self.loop_failures.labels(loop).inc()

    def observe(
        self, endpoint: str, kind: str, operation: str, result: str, seconds: float
    ) -> None:
        endpoint = bounded(endpoint, ENDPOINTS)
        self.reviews.labels(
            endpoint,
            bounded(kind, KINDS),
            bounded(operation, OPERATIONS),
            bounded(result, RESULTS),
        ).inc()
        self.latency.labels(endpoint).observe(seconds)

    def exposition(self) -> bytes:
        return bytes(generate_latest(self.registry))
