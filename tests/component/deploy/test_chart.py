"""The Helm chart: lint, render, validate offline, and hold it to the security contract.

Everything here runs the real helm binary (deploy/tools/install-helm.sh) and validates the
rendered manifests against Kubernetes 1.35's OpenAPI schemas (kubernetes-validate, strict).
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from chart_helpers import CHART, CI_VALUES, NAMESPACE, RELEASE, REPO, Helm, Rendered, venv_bin
from cryptography import x509
from cryptography.x509.oid import ExtensionOID

from bridge.config import BridgeConfig, LabelSelector, parse_config

KUBE_VERSION = "1.35.0"
COMPONENTS = ("scheduler", "controller", "admission")
SCENARIOS = [
    pytest.param((), id="defaults"),
    *[pytest.param((p.name,), id=p.stem) for p in sorted(CI_VALUES.glob("*.yaml"))],
]

# ---------------------------------------------------------------- the RBAC contract
READ = frozenset({"get", "list", "watch"})
PATCH = frozenset({"patch"})
GET = frozenset({"get"})
LIST_WATCH = frozenset({"list", "watch"})
# Every write of the bridge is a PATCH (verb "patch") except the Lease's PUT ("update").
# DRA writes need resourceclaims/binding too (Kubernetes 1.36,
# DRAResourceClaimGranularStatusAuthorization).
EXPECTED_RULES: dict[str, dict[tuple[str, str], frozenset[str]]] = {
    "scheduler": {
        ("", "pods"): READ | PATCH,
        ("", "pods/binding"): frozenset({"create"}),
        ("", "pods/status"): PATCH,
        ("", "nodes"): READ,
        ("", "namespaces"): READ,
        ("", "events"): frozenset({"create", "patch"}),
        ("scheduling.x-k8s.io", "podgroups"): LIST_WATCH,
        ("scheduling.k8s.io", "podgroups"): READ,  # get: the scheduled condition's write
        ("scheduling.k8s.io", "workloads"): LIST_WATCH,
        ("scheduling.k8s.io", "compositepodgroups"): READ,
        ("scheduling.k8s.io", "podgroups/status"): PATCH,
        ("scheduling.k8s.io", "compositepodgroups/status"): PATCH,
        ("jobset.x-k8s.io", "jobsets"): LIST_WATCH,
        ("leaderworkerset.x-k8s.io", "leaderworkersets"): LIST_WATCH,
        ("batch", "jobs"): LIST_WATCH,
        ("resource.k8s.io", "deviceclasses"): LIST_WATCH,
        ("resource.k8s.io", "resourceslices"): LIST_WATCH,
        ("resource.k8s.io", "devicetaintrules"): LIST_WATCH,
        ("resource.k8s.io", "resourceclaimtemplates"): LIST_WATCH,
        ("resource.k8s.io", "resourceclaims"): READ | {"create", "patch"},
        ("resource.k8s.io", "resourceclaims/status"): PATCH,
        ("resource.k8s.io", "resourceclaims/binding"): PATCH,
    },
    "controller": {
        ("", "pods"): READ | {"patch", "delete"},
        ("", "pods/status"): PATCH,
        ("", "nodes"): READ | PATCH,
        ("", "nodes/status"): PATCH,
        ("resource.k8s.io", "resourceslices"): LIST_WATCH,
        ("resource.k8s.io", "devicetaintrules"): LIST_WATCH,
        ("", "events"): frozenset({"create", "patch"}),
        ("scheduling.x-k8s.io", "podgroups/status"): PATCH,
        ("scheduling.k8s.io", "podgroups"): GET,
        ("scheduling.k8s.io", "compositepodgroups"): GET,
        ("scheduling.k8s.io", "podgroups/status"): PATCH,
        ("scheduling.k8s.io", "compositepodgroups/status"): PATCH,
        ("resource.k8s.io", "resourceclaims"): frozenset({"get", "patch", "delete"}),
        ("resource.k8s.io", "resourceclaims/status"): PATCH,
        ("resource.k8s.io", "resourceclaims/binding"): PATCH,
    },
    "admission": {
        ("", "namespaces"): frozenset({"get"}),
        ("", "nodes"): frozenset({"get"}),  # the Slurm-node guard: the node a new pod names
    },
}
PLACEMENT_WEBHOOK = "pods-placement.validate."
LEASE_RULES = {("coordination.k8s.io", "leases"): frozenset({"get", "create", "update"})}


def flatten_rules(rules: list[dict[str, Any]]) -> dict[tuple[str, str], frozenset[str]]:
    out: dict[tuple[str, str], frozenset[str]] = {}
    for rule in rules:
        assert "resourceNames" not in rule, rule
        assert "nonResourceURLs" not in rule, rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out[(group, resource)] = out.get((group, resource), frozenset()) | set(
                    rule["verbs"]
                )
    return out


def name_of(component: str) -> str:
    return f"{RELEASE}-slurm-bridge-{component}"


def deployments(r: Rendered) -> dict[str, dict[str, Any]]:
    return {
        d["metadata"]["labels"]["app.kubernetes.io/component"]: d for d in r.of_kind("Deployment")
    }


def rendered_config(r: Rendered) -> BridgeConfig:
    return parse_config(yaml.safe_load(r.config_text()), env={})


# ------------------------------------------------------------------------- lint/render
def test_helm_lint_strict_passes_with_defaults_and_every_ci_values_file(helm: Helm) -> None:
    proc = helm.run("lint", "--strict", str(CHART), "--namespace", NAMESPACE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for values in sorted(CI_VALUES.glob("*.yaml")):
        proc = helm.run("lint", "--strict", str(CHART), "--namespace", NAMESPACE, "-f", str(values))
        assert proc.returncode == 0, f"{values.name}:\n{proc.stdout}{proc.stderr}"


# Minimal schemas of the custom resources the chart may render (cert-manager,
# prometheus-operator): the fields the chart writes, strictly.
_STR = {"type": "string"}
_META = {"type": "object", "required": ["name", "namespace"]}
CR_SCHEMAS: dict[str, dict[str, Any]] = {
    "cert-manager.io/v1/Issuer": {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "metadata": _META,
            "spec": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "selfSigned": {"type": "object"},
                    "ca": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["secretName"],
                        "properties": {"secretName": _STR},
                    },
                },
                "minProperties": 1,
                "maxProperties": 1,
            },
        },
    },
    "cert-manager.io/v1/Certificate": {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "metadata": _META,
            "spec": {
                "type": "object",
                "additionalProperties": False,
                "required": ["secretName", "issuerRef"],
                "anyOf": [{"required": ["dnsNames"]}, {"required": ["isCA", "commonName"]}],
                "properties": {
                    "isCA": {"type": "boolean"},
                    "secretName": _STR,
                    "commonName": {"type": "string", "maxLength": 64},
                    "dnsNames": {"type": "array", "items": _STR, "minItems": 1},
                    "duration": _STR,
                    "renewBefore": _STR,
                    "usages": {"type": "array", "items": _STR},
                    "privateKey": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "algorithm": {"enum": ["RSA", "ECDSA", "Ed25519"]},
                            "size": {"type": "integer"},
                            "rotationPolicy": {"enum": ["Never", "Always"]},
                        },
                    },
                    "issuerRef": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["name"],
                        "properties": {"name": _STR, "kind": _STR, "group": _STR},
                    },
                },
            },
        },
    },
    "monitoring.coreos.com/v1/ServiceMonitor": {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "metadata": _META,
            "spec": {
                "type": "object",
                "additionalProperties": False,
                "required": ["selector", "endpoints"],
                "properties": {
                    "selector": {"type": "object"},
                    "namespaceSelector": {
                        "type": "object",
                        "properties": {"matchNames": {"type": "array", "items": _STR}},
                    },
                    "endpoints": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {
                                "port": _STR,
                                "path": _STR,
                                "interval": _STR,
                                "scrapeTimeout": _STR,
                            },
                        },
                    },
                },
            },
        },
    },
}


@pytest.mark.parametrize("values", SCENARIOS)
def test_every_rendered_manifest_validates_against_kubernetes_1_35_strict(
    helm: Helm, values: tuple[str, ...]
) -> None:
    rendered = helm.render(*values)
    assert rendered.docs
    for doc in rendered.docs:
        ident = f"{doc['kind']}/{doc['metadata']['name']}"
        cr_key = f"{doc['apiVersion']}/{doc['kind']}"
        if cr_key in CR_SCHEMAS:
            jsonschema.validate(doc, CR_SCHEMAS[cr_key])
            continue
        try:
            kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{ident}: {e.message}")
        assert len(doc["metadata"]["name"]) <= 63, ident


@pytest.mark.parametrize("values", SCENARIOS)
def test_rendered_config_parses_with_the_bridge_parser(helm: Helm, values: tuple[str, ...]) -> None:
    rendered = helm.render(*values)
    cfg = rendered_config(rendered)
    # The chart owns these: they must point at what it mounts.
    assert str(cfg.slurm_token_file) == "/var/run/secrets/slurm/auth-token"
    assert str(cfg.admission.tls_cert_file) == "/tls/tls.crt"
    assert str(cfg.admission.tls_key_file) == "/tls/tls.key"
    assert cfg.leader_election_namespace == NAMESPACE


def test_chart_config_values_reach_the_config_file_unchanged(helm: Helm) -> None:
    cfg = rendered_config(helm.render("full-config-values.yaml"))
    assert cfg.slurm_rest_api == "https://slurmrestd.hpc.example.com:6820"
    assert cfg.partition == "k8s"
    assert cfg.scheduler.jobset_grouping == "replicatedJob"
    assert cfg.controller.job_ended_pod_policy == "delete"
    assert cfg.admission.port == 10443


def test_values_schema_is_generated_from_bridge_config() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "gen_chart_schema", REPO / "deploy" / "tools" / "gen_chart_schema.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    committed = json.loads((CHART / "values.schema.json").read_text())
    assert committed == module.build_schema(), (
        "values.schema.json is stale: run .venv/bin/python deploy/tools/gen_chart_schema.py"
    )


def test_chart_yaml_files_pass_yamllint() -> None:
    files = [CHART / "Chart.yaml", CHART / "values.yaml", *sorted(CI_VALUES.glob("*.yaml"))]
    config = "{extends: default, rules: {line-length: {max: 100}, document-start: disable}}"
    proc = subprocess.run(
        [venv_bin("yamllint"), "--strict", "-d", config, *map(str, files)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ------------------------------------------------------------------------ bad values
@pytest.mark.parametrize(
    ("args", "names"),
    [
        pytest.param(["--set", "scheduler.replicas=two"], "/scheduler/replicas", id="replicas-two"),
        pytest.param(
            ["--set", "admission.failurePolicy=Sometimes"],
            "/admission/failurePolicy",
            id="unknown-failure-policy",
        ),
        pytest.param(
            ["--set", "admission.timeoutSeconds=60"], "/admission/timeoutSeconds", id="timeout-60"
        ),
        pytest.param(["--set", "config.bogus=1"], "bogus", id="unknown-config-key"),
        pytest.param(
            ["--set", "config.scheduler.workers=0"], "/config/scheduler/workers", id="workers-0"
        ),
        pytest.param(
            ["--set", "config.controller.jobEndedPodPolicy=explode"],
            "/config/controller/jobEndedPodPolicy",
            id="bad-job-ended-policy",
        ),
        pytest.param(["--set", "image.digest=latest"], "/image/digest", id="digest-not-sha256"),
        pytest.param(
            ["--set", "slurm.jwt.existingSecret=Not_A_Name"],
            "/slurm/jwt/existingSecret",
            id="bad-secret-name",
        ),
        pytest.param(["--set", "scheduler.replicaz=2"], "replicaz", id="typo-in-component"),
        pytest.param(
            ["--set", f"config.managedNamespaces[0]={NAMESPACE}"],
            "config.managedNamespaces",
            id="release-namespace-managed",
        ),
        pytest.param(
            ["--set-json", "config.managedNamespaces=[]"],
            "config.managedNamespaces",
            id="no-managed-namespaces-no-cluster-wide-webhook",
        ),
        pytest.param(
            ["--set", "config.leaderElection=false"],
            "scheduler.replicas",
            id="two-replicas-without-leader-election",
        ),
        pytest.param(
            ["--set", "slurm.jwt.create=true"], "slurm.jwt.token", id="jwt-create-no-token"
        ),
        pytest.param(["--set", "config.healthPort=0"], "config.healthPort", id="health-port-0"),
    ],
)
def test_bad_values_fail_helm_template_naming_the_value(
    helm: Helm, args: list[str], names: str
) -> None:
    proc = helm.run("template", RELEASE, str(CHART), "--namespace", NAMESPACE, *args)
    assert proc.returncode != 0, f"accepted {args}"
    assert names in proc.stderr, proc.stderr


# ------------------------------------------------------------------------------ RBAC
@pytest.mark.parametrize("values", SCENARIOS)
def test_rbac_is_exactly_the_least_privilege_table(helm: Helm, values: tuple[str, ...]) -> None:
    rendered = helm.render(*values)
    deps = deployments(rendered)
    cfg = rendered_config(rendered)
    extra = yaml.safe_load((CI_VALUES / values[0]).read_text()) if values else {}
    for component in COMPONENTS:
        roles = [
            r
            for r in rendered.of_kind("ClusterRole")
            if r["metadata"]["name"] == name_of(component)
        ]
        if component not in deps:
            assert not roles, f"{component} disabled but has a ClusterRole"
            continue
        (role,) = roles
        expected = dict(EXPECTED_RULES[component])
        if component == "controller" and cfg.managed_namespace_selector is not None:
            # it reads a namespace's labels before it believes a pod's job-id label
            expected[("", "namespaces")] = frozenset({"get"})
        for rule in (extra.get(component) or {}).get("extraRules", []):
            for g in rule["apiGroups"]:
                for res in rule["resources"]:
                    expected[(g, res)] = frozenset(rule["verbs"])
        assert flatten_rules(role["rules"]) == expected, component
        binding = rendered.one("ClusterRoleBinding", name_of(component))
        sa = deps[component]["spec"]["template"]["spec"]["serviceAccountName"]
        assert binding["roleRef"]["name"] == name_of(component)
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": sa, "namespace": NAMESPACE}
        ]
        lease_roles = [
            r
            for r in rendered.of_kind("Role")
            if r["metadata"]["name"] == f"{name_of(component)}-leader-election"
        ]
        if component == "admission" or not cfg.leader_election:
            assert not lease_roles
        else:
            (lease_role,) = lease_roles
            assert lease_role["metadata"]["namespace"] == cfg.leader_election_namespace
            assert flatten_rules(lease_role["rules"]) == LEASE_RULES
    for kind in ("ClusterRole", "Role"):
        for role in rendered.of_kind(kind):
            for rule in role["rules"]:
                for field_name in ("apiGroups", "resources", "verbs"):
                    assert "*" not in rule[field_name], (role["metadata"]["name"], rule)
                assert not {"secrets", "configmaps"} & set(rule["resources"]), (
                    "secrets reach the pods as mounted volumes, never through the API"
                )


# -------------------------------------------------------------------------- webhooks
def _namespace_labels(name: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return {"kubernetes.io/metadata.name": name, **(extra or {})}


def _selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    return LabelSelector.model_validate(selector).matches(labels)


SAMPLE_NAMESPACES = [
    ("slurm-bridge", {}),
    ("hpc-a", {}),
    ("hpc-b", {"tier": "system"}),
    ("labelled", {"slinky.slurm.net/managed": "true"}),
    ("labelled-system", {"slinky.slurm.net/managed": "true", "tier": "system"}),
    ("default", {}),
    ("kube-system", {}),
    (NAMESPACE, {"slinky.slurm.net/managed": "true"}),
]


@pytest.mark.parametrize("values", SCENARIOS)
def test_webhooks_are_scoped_to_exactly_the_managed_namespaces(
    helm: Helm, values: tuple[str, ...]
) -> None:
    rendered = helm.render(*values)
    configs = rendered.of_kind("MutatingWebhookConfiguration") + rendered.of_kind(
        "ValidatingWebhookConfiguration"
    )
    if "admission" not in deployments(rendered):
        assert not configs
        return
    cfg = rendered_config(rendered)
    for wh_config in configs:
        by_kind: dict[str, list[dict[str, Any]]] = {}
        for wh in wh_config["webhooks"]:
            selector = wh["namespaceSelector"]
            assert selector.get("matchLabels") or selector.get("matchExpressions"), (
                "a webhook without namespaceSelector is cluster-wide"
            )
            if wh["name"].startswith(PLACEMENT_WEBHOOK):
                # the Slurm-node guard: every namespace but the release's and the exempt
                exempt = {NAMESPACE, *cfg.admission.node_guard_exempt_namespaces}
                for ns, extra in SAMPLE_NAMESPACES:
                    hit = _selector_matches(selector, _namespace_labels(ns, extra))
                    assert hit == (ns not in exempt), (ns, hit)
                continue
            by_kind.setdefault(wh["name"].split(".")[0].split("-")[0], []).append(wh)
        for kind, hooks in by_kind.items():
            for ns, extra in SAMPLE_NAMESPACES:
                labels = _namespace_labels(ns, extra)
                hits = sum(_selector_matches(h["namespaceSelector"], labels) for h in hooks)
                managed = ns != NAMESPACE and cfg.namespace_is_managed(ns, labels)
                assert hits == (1 if managed else 0), (wh_config["kind"], kind, ns, hits)


@pytest.mark.parametrize("values", SCENARIOS)
def test_webhook_entries_are_complete_and_configurable(helm: Helm, values: tuple[str, ...]) -> None:
    rendered = helm.render(*values)
    if "admission" not in deployments(rendered):
        return
    chart_values = yaml.safe_load((CHART / "values.yaml").read_text())
    overrides = yaml.safe_load((CI_VALUES / values[0]).read_text()) if values else {}
    adm = {**chart_values["admission"], **(overrides.get("admission") or {})}
    service = rendered.one("Service", name_of("admission"))
    assert service["spec"]["ports"][0]["targetPort"] == "https"
    for kind, path in (
        ("MutatingWebhookConfiguration", "/mutate"),
        ("ValidatingWebhookConfiguration", "/validate"),
    ):
        (wh_config,) = rendered.of_kind(kind)
        for wh in wh_config["webhooks"]:
            guard = wh["name"].startswith(PLACEMENT_WEBHOOK)
            assert wh["sideEffects"] == "None"
            assert wh["admissionReviewVersions"] == ["v1"]
            assert wh["failurePolicy"] == adm["failurePolicy"]
            assert wh["timeoutSeconds"] == adm["timeoutSeconds"]
            assert wh["clientConfig"]["service"] == {
                "name": service["metadata"]["name"],
                "namespace": NAMESPACE,
                "path": "/validate-placement" if guard else path,
                "port": service["spec"]["ports"][0]["port"],
            }
            assert "objectSelector" not in wh, "a user label must not opt a pod out"
            for rule in wh["rules"]:
                assert "*" not in rule["resources"]
                assert "*" not in rule["apiGroups"]
    (mutating,) = rendered.of_kind("MutatingWebhookConfiguration")
    assert {
        (tuple(r["resources"]), tuple(r["operations"]))
        for wh in mutating["webhooks"]
        for r in wh["rules"]
    } == {(("pods",), ("CREATE",))}
    (validating,) = rendered.of_kind("ValidatingWebhookConfiguration")
    validated = {
        (g, res, tuple(r["operations"]))
        for wh in validating["webhooks"]
        for r in wh["rules"]
        for g in r["apiGroups"]
        for res in r["resources"]
    }
    placement = [wh for wh in validating["webhooks"] if wh["name"].startswith(PLACEMENT_WEBHOOK)]
    assert [r["resources"] for wh in placement for r in wh["rules"]] == (
        [["pods"]] if rendered_config(rendered).admission.node_guard else []
    )
    assert validated == {
        ("", "pods", ("CREATE", "UPDATE")),
        ("", "pods/resize", ("CREATE", "UPDATE")),  # a bound pod's resize is refused
        ("scheduling.x-k8s.io", "podgroups", ("CREATE", "UPDATE")),
        ("scheduling.k8s.io", "podgroups", ("CREATE", "UPDATE")),
        ("scheduling.k8s.io", "workloads", ("CREATE", "UPDATE")),  # a Workload gang's
        ("scheduling.k8s.io", "compositepodgroups", ("CREATE", "UPDATE")),
        ("jobset.x-k8s.io", "jobsets", ("CREATE", "UPDATE")),
        ("leaderworkerset.x-k8s.io", "leaderworkersets", ("CREATE", "UPDATE")),
        ("batch", "jobs", ("CREATE", "UPDATE")),
    }


def test_generated_certificate_is_signed_by_the_ca_bundle_and_names_the_service(
    helm: Helm,
) -> None:
    rendered = helm.render()
    secret = rendered.one("Secret", f"{RELEASE}-slurm-bridge-admission-tls")
    ca_pem = base64.b64decode(secret["data"]["ca.crt"])
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    ca = x509.load_pem_x509_certificate(ca_pem)
    cert.verify_directly_issued_by(ca)
    sans = cert.extensions.get_extension_for_oid(ExtensionOID.SUBJECT_ALTERNATIVE_NAME).value
    assert f"{name_of('admission')}.{NAMESPACE}.svc" in sans.get_values_for_type(x509.DNSName)
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        (wh_config,) = rendered.of_kind(kind)
        for wh in wh_config["webhooks"]:
            assert base64.b64decode(wh["clientConfig"]["caBundle"]) == ca_pem


@pytest.mark.parametrize(
    "values",
    [
        pytest.param("cert-manager-values.yaml", id="self-signed-issuer"),
        pytest.param("cert-manager-issuer-values.yaml", id="existing-cluster-issuer"),
    ],
)
def test_cert_manager_issues_the_certificate_and_injects_the_ca(helm: Helm, values: str) -> None:
    rendered = helm.render(values)
    cert = rendered.one("Certificate", name_of("admission"))
    assert cert["spec"]["secretName"] == f"{RELEASE}-slurm-bridge-admission-tls"
    assert f"{name_of('admission')}.{NAMESPACE}.svc" in cert["spec"]["dnsNames"]
    assert not rendered.of_kind("Secret"), "cert-manager owns the TLS Secret"
    issuers = rendered.of_kind("Issuer")
    if values == "cert-manager-values.yaml":
        # the chart's CA Issuer chain (tests/component/deploy/test_chart_security.py)
        assert cert["spec"]["issuerRef"]["name"] in [i["metadata"]["name"] for i in issuers]
        trusted = f"{NAMESPACE}/{name_of('admission')}-ca"
    else:
        assert not issuers
        assert cert["spec"]["issuerRef"]["kind"] == "ClusterIssuer"
        trusted = f"{NAMESPACE}/{name_of('admission')}"
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        (wh_config,) = rendered.of_kind(kind)
        assert wh_config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == trusted
        assert all("caBundle" not in wh["clientConfig"] for wh in wh_config["webhooks"])


# ------------------------------------------------------------------ pods and security
@pytest.mark.parametrize("values", SCENARIOS)
def test_every_container_runs_non_root_read_only_without_capabilities(
    helm: Helm, values: tuple[str, ...]
) -> None:
    rendered = helm.render(*values)
    for component, dep in deployments(rendered).items():
        pod = dep["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        volumes = {v["name"]: v for v in pod["volumes"]}
        for c in pod["containers"] + pod.get("initContainers", []):
            sc = c["securityContext"]
            assert sc["runAsNonRoot"] is True, component
            assert sc["runAsUser"] == 65532, component
            assert sc["readOnlyRootFilesystem"] is True, component
            assert sc["allowPrivilegeEscalation"] is False, component
            assert sc["capabilities"] == {"drop": ["ALL"]}, component
            assert sc["seccompProfile"] == {"type": "RuntimeDefault"}, component
            mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
            assert "emptyDir" in volumes[mounts["/tmp"]["name"]], "the only writable path"
            assert all(m.get("readOnly") for p, m in mounts.items() if p != "/tmp"), (
                f"{component}: every other mount is read-only"
            )
            assert c["resources"]["requests"]
            assert c["resources"]["limits"]["memory"]
            assert c["args"][:3] == [component, "--config", "/etc/slurm-bridge/config.yaml"]


@pytest.mark.parametrize("values", SCENARIOS)
def test_probes_use_the_configured_health_port(helm: Helm, values: tuple[str, ...]) -> None:
    rendered = helm.render(*values)
    cfg = rendered_config(rendered)
    for component, dep in deployments(rendered).items():
        (c,) = dep["spec"]["template"]["spec"]["containers"]
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        assert ports["health"] == cfg.health_port
        assert ports.get("metrics") == (cfg.metrics_port or None)
        assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
        assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
        if component == "admission":
            assert ports["https"] == cfg.admission.port


@pytest.mark.parametrize(
    ("values", "secret", "key"),
    [
        pytest.param((), "slurm-bridge-jwt", "auth-token", id="defaults"),
        pytest.param(("full-config-values.yaml",), "my-slurm-token", "token", id="custom"),
    ],
)
def test_jwt_is_mounted_from_the_referenced_secret_and_never_created(
    helm: Helm, values: tuple[str, ...], secret: str, key: str
) -> None:
    rendered = helm.render(*values)
    cfg = rendered_config(rendered)
    token_dir, token_file = str(Path(cfg.slurm_token_file).parent), Path(cfg.slurm_token_file).name
    assert not [s for s in rendered.of_kind("Secret") if s["metadata"]["name"] == secret]
    for component, dep in deployments(rendered).items():
        pod = dep["spec"]["template"]["spec"]
        jwt_volumes = [v for v in pod["volumes"] if v.get("secret", {}).get("secretName") == secret]
        (c,) = pod["containers"]
        if component == "admission":
            assert not jwt_volumes, "admission never talks to Slurm"
            continue
        (vol,) = jwt_volumes
        assert vol["secret"]["items"] == [{"key": key, "path": token_file}]
        (mount,) = [m for m in c["volumeMounts"] if m["name"] == vol["name"]]
        assert mount["mountPath"] == token_dir
        assert mount["readOnly"] is True
        assert all(e["name"] != "SLURM_JWT" and "secretKeyRef" not in str(e) for e in c["env"])


def test_jwt_secret_is_created_only_when_explicitly_asked(helm: Helm) -> None:
    rendered = helm.render(sets=("slurm.jwt.create=true", "slurm.jwt.token=abc.def.ghi"))
    secret = rendered.one("Secret", "slurm-bridge-jwt")
    assert base64.b64decode(secret["data"]["auth-token"]) == b"abc.def.ghi"


def test_leader_election_is_on_with_two_replicas_and_a_pdb_by_default(helm: Helm) -> None:
    rendered = helm.render()
    assert rendered_config(rendered).leader_election is True
    for component in COMPONENTS:
        assert rendered.one("Deployment", name_of(component))["spec"]["replicas"] == 2
        pdb = rendered.one("PodDisruptionBudget", name_of(component))
        assert pdb["spec"]["maxUnavailable"] == 1


def test_disabled_components_render_nothing(helm: Helm) -> None:
    rendered = helm.render("scheduler-only-values.yaml")
    components = {d["metadata"]["labels"].get("app.kubernetes.io/component") for d in rendered.docs}
    assert components == {"scheduler", None}  # None: the shared ConfigMap
    assert not rendered.of_kind("PodDisruptionBudget"), "one replica: no PDB"
    assert not rendered.of_kind("MutatingWebhookConfiguration")


def test_service_monitor_scrapes_every_metrics_service(helm: Helm) -> None:
    rendered = helm.render("servicemonitor-values.yaml")
    (sm,) = rendered.of_kind("ServiceMonitor")
    assert sm["metadata"]["labels"]["release"] == "prometheus"
    selector = sm["spec"]["selector"]
    metrics = [s for s in rendered.of_kind("Service") if s["metadata"]["name"].endswith("-metrics")]
    assert len(metrics) == 3
    for svc in metrics:
        assert _selector_matches(selector, svc["metadata"]["labels"])
    assert not [
        s
        for s in rendered.of_kind("Service")
        if s not in metrics and _selector_matches(selector, s["metadata"]["labels"])
    ]
    assert sm["spec"]["endpoints"][0]["port"] == "metrics"
    assert not helm.render().of_kind("ServiceMonitor"), "off by default"


def test_image_digest_wins_over_tag(helm: Helm) -> None:
    rendered = helm.render("full-config-values.yaml")
    for dep in deployments(rendered).values():
        (c,) = dep["spec"]["template"]["spec"]["containers"]
        assert c["image"] == (
            "registry.example.com/hpc/slurm-bridge@sha256:"
            "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
        )


def test_notes_tell_how_to_check_the_install(helm: Helm) -> None:
    proc = helm.run("install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--dry-run=client")
    assert proc.returncode == 0, proc.stderr
    notes = proc.stdout.split("NOTES:", 1)[1]
    assert f"kubectl -n {NAMESPACE} get pods" in notes
    assert "squeue" in notes
    # a finite token, rotated by running the command again (issue 30, finding 13)
    assert "lifespan=604800" in notes
    assert "lifespan=infinite" not in notes
