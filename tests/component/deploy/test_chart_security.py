"""The chart's security settings, rendered by the real helm binary: the optional
NetworkPolicies, the cert-manager CA Issuer chain, the renewal of the chart-generated
webhook certificate, and the slurmrestd CA mount."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_helpers import CHART, NAMESPACE, RELEASE, Helm, Rendered
from cryptography import x509

from bridge.config import parse_config

DAY = 86400


def name_of(component: str) -> str:
    return f"{RELEASE}-slurm-bridge-{component}"


def pod_labels(rendered: Rendered, component: str) -> dict[str, str]:
    dep = rendered.one("Deployment", name_of(component))
    labels: dict[str, str] = dep["spec"]["template"]["metadata"]["labels"]
    return labels


def ports(rule: dict[str, Any]) -> set[tuple[Any, str]]:
    return {(p["port"], p["protocol"]) for p in rule["ports"]}


def render(helm: Helm, *sets: str, files: tuple[str, ...] = ()) -> Rendered:
    proc = helm.template(files, sets)
    assert proc.returncode == 0, proc.stderr
    return Rendered([d for d in yaml.safe_load_all(proc.stdout) if d])


# ------------------------------------------------------------------ network policy
def test_no_network_policy_is_rendered_by_default(helm: Helm) -> None:
    assert not helm.render().of_kind("NetworkPolicy")


def test_network_policies_select_each_component_and_allow_only_its_traffic(helm: Helm) -> None:
    rendered = helm.render("network-policy-values.yaml")
    policies = {p["metadata"]["name"]: p for p in rendered.of_kind("NetworkPolicy")}
    assert set(policies) == {name_of(c) for c in ("scheduler", "controller", "admission")}
    api = [{"ipBlock": {"cidr": "10.0.0.0/24"}}]
    for component in ("scheduler", "controller", "admission"):
        spec = policies[name_of(component)]["spec"]
        assert spec["policyTypes"] == ["Ingress", "Egress"]
        selector = spec["podSelector"]["matchLabels"]
        assert selector.items() <= pod_labels(rendered, component).items()
        other = "admission" if component != "admission" else "scheduler"
        assert not selector.items() <= pod_labels(rendered, other).items()

        ingress = {tuple(sorted(ports(r))): r.get("from") for r in spec["ingress"]}
        assert ingress[(("health", "TCP"),)] is None  # the kubelet's probes
        monitoring = ingress[(("metrics", "TCP"),)]
        assert monitoring is not None
        assert monitoring[0]["namespaceSelector"]["matchLabels"] == {
            "kubernetes.io/metadata.name": "monitoring"
        }
        if component == "admission":
            assert ingress[(("https", "TCP"),)] == api
        else:
            assert (("https", "TCP"),) not in ingress

        egress = {tuple(sorted(ports(r))): r.get("to") for r in spec["egress"]}
        assert egress[((443, "TCP"), (6443, "TCP"))] == api
        assert egress[((53, "TCP"), (53, "UDP"))][0]["podSelector"]["matchLabels"] == {
            "k8s-app": "kube-dns"
        }
        slurm = egress.get(((6821, "TCP"),))
        if component == "admission":
            assert slurm is None  # the webhook never talks to Slurm
            assert len(egress) == 2
        else:
            assert slurm is not None
            assert slurm[0]["namespaceSelector"]["matchLabels"] == {
                "kubernetes.io/metadata.name": "slurm"
            }
            assert len(egress) == 3


@pytest.mark.parametrize(
    ("url", "port"),
    [
        ("http://slurm-restapi.slurm:6820", 6820),
        ("https://slurmrestd.slurm.svc", 443),
        ("http://slurmrestd.slurm.svc", 80),
        ("https://[fd00::5]:7443", 7443),
    ],
)
def test_slurmrestd_egress_port_comes_from_the_configured_url(
    helm: Helm, url: str, port: int
) -> None:
    rendered = render(helm, "networkPolicy.enabled=true", f"config.slurmRestApi={url}")
    policy = rendered.one("NetworkPolicy", name_of("scheduler"))
    egress = [ports(r) for r in policy["spec"]["egress"]]
    assert {(port, "TCP")} in egress
    # without peers, every egress rule is still bounded by its ports
    assert all(r["ports"] for r in policy["spec"]["egress"])
    assert all("to" not in r for r in policy["spec"]["egress"])


def test_extra_egress_rules_are_appended(helm: Helm) -> None:
    rule = {"to": [{"ipBlock": {"cidr": "192.0.2.0/24"}}], "ports": [{"port": 8443}]}
    proc = helm.template(
        (), ("networkPolicy.enabled=true",), (f"networkPolicy.extraEgress=[{json.dumps(rule)}]",)
    )
    assert proc.returncode == 0, proc.stderr
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d and d["kind"] == "NetworkPolicy"]
    assert all(d["spec"]["egress"][-1] == rule for d in docs)


# ------------------------------------------------------------------ slurmrestd CA
@pytest.mark.parametrize("source", ["secret", "configMap"])
def test_the_slurmrestd_ca_is_mounted_and_named_in_the_config(helm: Helm, source: str) -> None:
    rendered = render(helm, f"slurm.ca.{source}=slurm-ca", "slurm.ca.key=root.pem")
    cfg = parse_config(yaml.safe_load(rendered.config_text()), env={})
    assert cfg.slurm_ca_file == Path("/var/run/secrets/slurm-ca/ca.crt")
    for component in ("scheduler", "controller"):
        pod = rendered.one("Deployment", name_of(component))["spec"]["template"]["spec"]
        (volume,) = [v for v in pod["volumes"] if v["name"] == "slurm-ca"]
        ref = volume["secret"] if source == "secret" else volume["configMap"]
        assert ref.get("secretName", ref.get("name")) == "slurm-ca"
        assert ref["items"] == [{"key": "root.pem", "path": "ca.crt"}]
        (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "slurm-ca"]
        assert mount == {
            "name": "slurm-ca",
            "mountPath": "/var/run/secrets/slurm-ca",
            "readOnly": True,
        }
    admission = rendered.one("Deployment", name_of("admission"))["spec"]["template"]["spec"]
    assert all(v["name"] != "slurm-ca" for v in admission["volumes"])


def test_no_slurmrestd_ca_by_default_and_not_both_sources(helm: Helm) -> None:
    cfg = parse_config(yaml.safe_load(helm.render().config_text()), env={})
    assert cfg.slurm_ca_file is None
    proc = helm.template((), ("slurm.ca.secret=a", "slurm.ca.configMap=b"))
    assert proc.returncode != 0
    assert "slurm.ca: set configMap or secret, not both" in proc.stderr


# ------------------------------------------------------------------ cert-manager chain
def test_cert_manager_default_is_a_ca_issuer_chain_whose_ca_the_webhooks_trust(
    helm: Helm,
) -> None:
    rendered = helm.render("cert-manager-values.yaml")
    admission = name_of("admission")
    root = rendered.one("Issuer", f"{admission}-selfsigned")
    assert root["spec"] == {"selfSigned": {}}
    ca_cert = rendered.one("Certificate", f"{admission}-ca")
    assert ca_cert["spec"]["isCA"] is True
    assert ca_cert["spec"]["issuerRef"]["name"] == f"{admission}-selfsigned"
    assert ca_cert["spec"]["privateKey"]["rotationPolicy"] == "Never"
    ca_issuer = rendered.one("Issuer", f"{admission}-ca")
    assert ca_issuer["spec"] == {"ca": {"secretName": ca_cert["spec"]["secretName"]}}
    leaf = rendered.one("Certificate", admission)
    assert leaf["spec"]["issuerRef"] == {
        "name": f"{admission}-ca",
        "kind": "Issuer",
        "group": "cert-manager.io",
    }
    assert "isCA" not in leaf["spec"]
    assert leaf["spec"]["privateKey"]["rotationPolicy"] == "Always"
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        (config,) = rendered.of_kind(kind)
        # the CA Certificate, not the leaf: a leaf renewal leaves the caBundle as it was
        assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
            f"{NAMESPACE}/{admission}-ca"
        )


# ------------------------------------------------------------------ generated certificates
PROBE = """\
{{- $args := dict "root" $ "existing" .Values.probe.existing "now" .Values.probe.now }}
{{- $_ := set $args "name" "sb-slurm-bridge-admission" }}
{{- $_ := set $args "dnsNames" (list "sb-slurm-bridge-admission.ns.svc") }}
{{- $gen := include "slurm-bridge.generatedTLS" $args | fromYaml }}
apiVersion: v1
kind: ConfigMap
metadata: {name: probe}
data:
  {{- toYaml $gen | nindent 2 }}
"""


class Generator:
    """The chart's ``slurm-bridge.generatedTLS`` helper, rendered by helm in a copy of the
    chart with a probe template, as if ``lookup`` had found ``existing``."""

    def __init__(self, helm: Helm, tmp: Path) -> None:
        self.helm = helm
        self.chart = tmp / "chart"
        shutil.copytree(CHART, self.chart)
        (self.chart / "templates" / "zz-probe.yaml").write_text(PROBE)

    def __call__(self, now: int, existing: dict[str, Any] | None = None) -> dict[str, str]:
        probe = {"now": now, "existing": existing or {}}
        proc = subprocess.run(
            [
                self.helm.binary,
                "template",
                RELEASE,
                str(self.chart),
                "--namespace",
                "ns",
                "--skip-schema-validation",
                "--show-only",
                "templates/zz-probe.yaml",
                "--set-json",
                f"probe={json.dumps(probe)}",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        data: dict[str, str] = yaml.safe_load(proc.stdout)["data"]
        return data


def as_secret(gen: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {
            "annotations": {
                "slurm-bridge.slinky.slurm.net/not-after": gen["notAfter"],
                "slurm-bridge.slinky.slurm.net/ca-not-after": gen["caNotAfter"],
            }
        },
        "data": {
            "tls.crt": gen["crt"],
            "tls.key": gen["key"],
            "ca.crt": gen["caCrt"],
            "ca.key": gen["caKey"],
        },
    }


def certs(b64: str) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(base64.b64decode(b64))


@pytest.fixture(scope="module")
def generate(helm: Helm, tmp_path_factory: pytest.TempPathFactory) -> Generator:
    return Generator(helm, tmp_path_factory.mktemp("probe-chart"))


NOW = 1_900_000_000
VALIDITY = 3650 * DAY  # the chart's defaults: validityDays 3650, renewBeforeDays 30
MARGIN = 30 * DAY


def test_a_fresh_install_gets_a_ca_and_a_leaf_it_signs_with_their_expiry_recorded(
    generate: Generator,
) -> None:
    gen = generate(NOW)
    (ca,) = certs(gen["caCrt"])
    (leaf,) = certs(gen["crt"])
    leaf.verify_directly_issued_by(ca)
    assert gen["caBundle"] == gen["caCrt"]
    assert int(gen["notAfter"]) == int(gen["caNotAfter"]) == NOW + VALIDITY


def test_an_upgrade_far_from_expiry_keeps_everything(generate: Generator) -> None:
    first = generate(NOW)
    again = generate(NOW + VALIDITY - MARGIN - DAY, as_secret(first))
    assert again == first


def test_a_leaf_near_expiry_is_renewed_by_the_same_ca_and_the_ca_bundle_stays(
    generate: Generator,
) -> None:
    first = generate(NOW)
    secret = as_secret(first)
    later = NOW + 400 * DAY
    secret["metadata"]["annotations"]["slurm-bridge.slinky.slurm.net/not-after"] = str(later + DAY)
    renewed = generate(later, secret)
    assert renewed["crt"] != first["crt"]
    assert renewed["key"] != first["key"]
    assert (renewed["caCrt"], renewed["caKey"], renewed["caBundle"]) == (
        first["caCrt"],
        first["caKey"],
        first["caBundle"],
    )
    (ca,) = certs(first["caBundle"])
    (leaf,) = certs(renewed["crt"])
    leaf.verify_directly_issued_by(ca)
    assert int(renewed["notAfter"]) == later + VALIDITY
    assert renewed["caNotAfter"] == first["caNotAfter"]


def test_a_ca_near_expiry_is_renewed_and_trusted_next_to_the_old_one(generate: Generator) -> None:
    first = generate(NOW)
    later = NOW + VALIDITY - MARGIN + DAY  # inside the renewal window of both
    renewed = generate(later, as_secret(first))
    assert renewed["caCrt"] != first["caCrt"]
    new_ca, old_ca = certs(renewed["caBundle"])
    assert old_ca == certs(first["caCrt"])[0]
    (leaf,) = certs(renewed["crt"])
    leaf.verify_directly_issued_by(new_ca)
    assert int(renewed["caNotAfter"]) == later + VALIDITY


def test_a_secret_from_an_older_chart_gets_a_new_ca_and_the_old_one_stays_trusted(
    generate: Generator,
) -> None:
    first = generate(NOW)
    legacy = {"data": {"tls.crt": first["crt"], "tls.key": first["key"], "ca.crt": first["caCrt"]}}
    renewed = generate(NOW + DAY, legacy)
    assert renewed["caKey"]
    assert renewed["crt"] != first["crt"]
    bundle = certs(renewed["caBundle"])
    assert certs(first["caCrt"])[0] in bundle
    assert len(bundle) == 2
