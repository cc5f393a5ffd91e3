"""Reading a Prometheus registry the way a scrape sees it (the exposition text)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(registry: CollectorRegistry) -> Samples:
    """(series name, sorted labels) -> value, parsed from ``/metrics``' text."""
    return parse(generate_latest(registry).decode())


def parse(text: str) -> Samples:
    """(series name, sorted labels) -> value of a Prometheus text exposition."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name``'s series carrying at least ``labels``."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))
