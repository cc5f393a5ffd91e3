"""Write the Helm chart's values.schema.json.

The chart's own values are described here by hand; ``config`` (the bridge's configuration
file) is generated from :class:`bridge.config.BridgeConfig`, so a key the bridge does not
know, or a value of the wrong type, fails ``helm install``/``helm template`` instead of
crash-looping the pods. tests/unit/deploy checks that the committed file is what this
script writes; after changing bridge/config.py run:

    .venv/bin/python deploy/tools/gen_chart_schema.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SCHEMA_PATH = REPO / "deploy" / "helm" / "slurm-bridge" / "values.schema.json"

_STR = {"type": "string"}
_BOOL = {"type": "boolean"}
_OBJ = {"type": "object"}
_ARR = {"type": "array"}
_DNS_SUBDOMAIN = {
    "type": "string",
    "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
    "maxLength": 253,
}
_QUANTITY = {"type": ["string", "integer", "number"]}
_DURATION = {"type": "string", "pattern": "^[0-9]+(h|m|s)$"}
_RESOURCES = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "requests": {"type": "object", "additionalProperties": _QUANTITY},
        "limits": {"type": "object", "additionalProperties": _QUANTITY},
        "claims": _ARR,
    },
}


def _component(min_replicas: int = 0) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["enabled", "replicas"],
        "properties": {
            "enabled": _BOOL,
            "replicas": {"type": "integer", "minimum": min_replicas, "maximum": 10},
            "resources": _RESOURCES,
            "podDisruptionBudget": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "enabled": _BOOL,
                    "maxUnavailable": {"type": ["integer", "string"], "minimum": 0},
                },
            },
            "serviceAccount": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "create": _BOOL,
                    "name": {"type": "string", "maxLength": 253},
                    "annotations": {"type": "object", "additionalProperties": _STR},
                },
            },
            "extraRules": {"type": "array", "items": {"type": "object"}},
            "extraArgs": {"type": "array", "items": _STR},
            "extraEnv": {"type": "array", "items": {"type": "object", "required": ["name"]}},
            "podAnnotations": {"type": "object", "additionalProperties": _STR},
            "podLabels": {"type": "object", "additionalProperties": _STR},
            "nodeSelector": {"type": "object", "additionalProperties": _STR},
            "tolerations": {"type": "array", "items": _OBJ},
            "affinity": _OBJ,
            "topologySpreadConstraints": {"type": "array", "items": _OBJ},
            "priorityClassName": _STR,
            "terminationGracePeriodSeconds": {"type": "integer", "minimum": 0},
        },
    }


def _admission() -> dict[str, Any]:
    schema = _component()
    props = schema["properties"]
    props["failurePolicy"] = {"enum": ["Fail", "Ignore"]}
    props["timeoutSeconds"] = {"type": "integer", "minimum": 1, "maximum": 30}
    props["service"] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"port": {"type": "integer", "minimum": 1, "maximum": 65535}},
    }
    props["paths"] = {
        "type": "object",
        "additionalProperties": False,
        "required": ["mutate", "validate", "placement"],
        "properties": {
            "mutate": {"type": "string", "pattern": "^/"},
            "validate": {"type": "string", "pattern": "^/"},
            "placement": {"type": "string", "pattern": "^/"},
        },
    }
    props["validateWorkloads"] = _BOOL
    props["trustedUsernames"] = {"type": "array", "items": {"type": "string", "minLength": 1}}
    props["trustKubeSystem"] = _BOOL
    props["tls"] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "certManager": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "enabled": _BOOL,
                    "issuerRef": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "name": _STR,
                            "kind": {"enum": ["Issuer", "ClusterIssuer"]},
                            "group": _STR,
                        },
                    },
                    "duration": _DURATION,
                    "renewBefore": _DURATION,
                    "caDuration": _DURATION,
                    "caRenewBefore": _DURATION,
                },
            },
            "generated": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "validityDays": {"type": "integer", "minimum": 2},
                    "renewBeforeDays": {"type": "integer", "minimum": 1},
                },
            },
        },
    }
    return schema


def _network_policy() -> dict[str, Any]:
    ports = {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 65535}}
    peers = {"type": "array", "items": _OBJ}

    def target() -> dict[str, Any]:
        return {
            "type": "object",
            "additionalProperties": False,
            "properties": {"to": peers, "ports": ports},
        }

    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "enabled": _BOOL,
            "webhookFrom": peers,
            "metricsFrom": peers,
            "apiServer": target(),
            "slurmrestd": target(),
            "dns": target(),
            "extraEgress": {"type": "array", "items": _OBJ},
        },
    }


def _strip_titles(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            k: _strip_titles(v)
            for k, v in node.items()
            if not (k == "title" and isinstance(v, str))
        }
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node


def config_schema() -> tuple[dict[str, Any], dict[str, Any]]:
    """(schema of ``config``, its ``$defs``), from BridgeConfig, refs under #/$defs/Config*."""
    from bridge.config import BridgeConfig

    raw = _strip_titles(BridgeConfig.model_json_schema(by_alias=True, mode="validation"))
    text = json.dumps(raw).replace('"#/$defs/', '"#/$defs/Config')
    generated = json.loads(text)
    defs = {f"Config{name}": body for name, body in generated.pop("$defs", {}).items()}
    generated["description"] = "The bridge's configuration file (README: Configuration)."
    return generated, defs


def build_schema() -> dict[str, Any]:
    config, defs = config_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "slurm-bridge Helm chart values",
        "type": "object",
        "additionalProperties": False,
        "required": ["image", "config", "slurm", "scheduler", "controller", "admission"],
        "properties": {
            "global": _OBJ,
            "image": {
                "type": "object",
                "additionalProperties": False,
                "required": ["repository"],
                "properties": {
                    "repository": {"type": "string", "minLength": 1},
                    "tag": _STR,
                    "digest": {"type": "string", "pattern": "^$|^sha256:[a-f0-9]{64}$"},
                    "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
                },
            },
            "imagePullSecrets": {"type": "array", "items": _OBJ},
            "nameOverride": _STR,
            "fullnameOverride": _STR,
            "commonLabels": {"type": "object", "additionalProperties": _STR},
            "config": config,
            "slurm": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "jwt": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["existingSecret", "key"],
                        "properties": {
                            "existingSecret": _DNS_SUBDOMAIN,
                            "key": {"type": "string", "pattern": "^[-._a-zA-Z0-9]+$"},
                            "create": _BOOL,
                            "token": _STR,
                            "mountPath": {"type": "string", "pattern": "^/"},
                        },
                    },
                    "ca": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "configMap": {"anyOf": [{"const": ""}, _DNS_SUBDOMAIN]},
                            "secret": {"anyOf": [{"const": ""}, _DNS_SUBDOMAIN]},
                            "key": {"type": "string", "pattern": "^[-._a-zA-Z0-9]+$"},
                            "mountPath": {"type": "string", "pattern": "^/"},
                        },
                    },
                },
            },
            "networkPolicy": _network_policy(),
            "rbac": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"create": _BOOL},
            },
            "podSecurityContext": _OBJ,
            "containerSecurityContext": _OBJ,
            "tmpSizeLimit": _QUANTITY,
            "scheduler": _component(),
            "controller": _component(),
            "admission": _admission(),
            "metrics": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "service": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "enabled": _BOOL,
                            "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                        },
                    },
                    "serviceMonitor": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "enabled": _BOOL,
                            "interval": _STR,
                            "scrapeTimeout": _STR,
                            "labels": {"type": "object", "additionalProperties": _STR},
                        },
                    },
                    "grafanaDashboard": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "enabled": _BOOL,
                            "labels": {"type": "object", "additionalProperties": _STR},
                            "annotations": {"type": "object", "additionalProperties": _STR},
                            "namespace": _STR,
                        },
                    },
                },
            },
        },
        "$defs": defs,
    }


def render() -> str:
    return json.dumps(build_schema(), indent=2, sort_keys=False) + "\n"


def main() -> int:
    sys.path.insert(0, str(REPO))
    SCHEMA_PATH.write_text(render())
    print(f"wrote {SCHEMA_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
