"""The chart's Grafana dashboard: an optional ConfigMap for Grafana's sidecar, a sound
dashboard JSON, and every metric it queries exported by one of the components."""

from __future__ import annotations

import json
import re
from typing import Any

from chart_helpers import CHART, Helm
from prometheus_client import CollectorRegistry

from admission.metrics import AdmissionMetrics
from controller.app import ControllerMetrics
from scheduler.metrics import SchedulerMetrics

VALUES = "grafana-dashboard-values.yaml"
# what the issue asks for, by panel title
REQUIRED_PANELS = {
    "Pending pods by reason",
    "Created -> bound latency",
    "Bind throughput",
    "Slurm queue by state",
    "Nodes by state",
    "CPU use per partition",
    "GPU use per partition",
    "slurmrestd errors",
}
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
    "info": ("_info",),
}


def exported_series_names() -> set[str]:
    """Every series name the components' registries can expose (by family type, so a
    labelled metric with no child yet still counts)."""
    registries: list[CollectorRegistry] = [
        SchedulerMetrics().registry,
        ControllerMetrics().registry,
        AdmissionMetrics().registry,
    ]
    names: set[str] = set()
    for registry in registries:
        for family in registry.collect():
            names |= {family.name + s for s in _SUFFIXES.get(family.type, ("",))}
            names |= {s.name for s in family.samples}
    return names


def dashboard_of(helm: Helm) -> tuple[dict[str, Any], dict[str, Any]]:
    rendered = helm.render(VALUES)
    (cm,) = [
        c for c in rendered.of_kind("ConfigMap") if c["metadata"]["name"].endswith("-dashboard")
    ]
    return cm, json.loads(cm["data"]["slurm-bridge.json"])


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in dashboard["panels"] if p["type"] != "row"]


def test_dashboard_configmap_is_off_by_default_and_labelled_for_the_sidecar(helm: Helm) -> None:
    assert not [
        c for c in helm.render().of_kind("ConfigMap") if "dashboard" in c["metadata"]["name"]
    ]
    cm, _ = dashboard_of(helm)
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["annotations"] == {"grafana_folder": "Slurm"}
    assert cm["metadata"]["namespace"] == "slurm-bridge-system"


def test_dashboard_json_in_the_chart_is_the_one_rendered(helm: Helm) -> None:
    _, rendered = dashboard_of(helm)
    assert rendered == json.loads((CHART / "dashboards" / "slurm-bridge.json").read_text())


def test_dashboard_has_the_panels_asked_for_each_well_formed(helm: Helm) -> None:
    _, dash = dashboard_of(helm)
    assert dash["uid"] == "slurm-bridge"
    assert isinstance(dash["schemaVersion"], int)
    assert {p["title"] for p in panels(dash)} >= REQUIRED_PANELS
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    for p in panels(dash):
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert {"h", "w", "x", "y"} <= set(p["gridPos"]), p["title"]
        assert p["gridPos"]["x"] + p["gridPos"]["w"] <= 24, p["title"]
        assert p["targets"], p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), p["title"]
        for t in p["targets"]:
            assert t["expr"].count("(") == t["expr"].count(")"), t["expr"]
    latency = next(p for p in panels(dash) if p["title"] == "Created -> bound latency")
    assert latency["type"] == "heatmap"
    assert "_bucket" in latency["targets"][0]["expr"]


def test_every_metric_the_dashboard_queries_is_exported_by_a_component(helm: Helm) -> None:
    _, dash = dashboard_of(helm)
    exported = exported_series_names()
    queried: set[str] = set()
    for p in panels(dash):
        for t in p["targets"]:
            found = set(re.findall(r"\bslurm_bridge_[a-z0-9_]+", t["expr"]))
            assert found, f"{p['title']}: {t['expr']} queries no slurm-bridge metric"
            queried |= found
    for v in dash["templating"]["list"]:
        queried |= set(re.findall(r"\bslurm_bridge_[a-z0-9_]+", v.get("definition", "")))
    missing = sorted(queried - exported)
    assert not missing, f"the dashboard queries metrics no component exports: {missing}"
