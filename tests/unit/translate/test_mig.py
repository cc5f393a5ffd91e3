"""MIG slices asked as extended resources (the device plugin's mixed strategy): each
becomes the typed GRES of its profile, through the config's table; an unmapped profile is
refused by translation and by the admission webhook alike, naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from admission.policy import AdmissionContext
from admission.review import parse_review
from admission.validate import validate
from bridge.config import DEFAULT_GRES_MAPPING, parse_config
from bridge.devices.mig import NVIDIA_MIG_PROFILES
from bridge.errors import ConfigError, InvalidInput
from bridge.models import JobSpec
from bridge.translate import TranslateSettings, translate_group
from bridge.translate.resources import pod_resources, unknown_device_problems
from tests.admission_helpers import make_pod, make_review

S = TranslateSettings()


def pod_asking(limits: dict[str, str], *, init: dict[str, str] | None = None) -> dict[str, Any]:
    p = make_pod(scheduler="slurm-bridge-scheduler", name="mig-0")
    p["metadata"]["uid"] = "u-mig-0"
    p["spec"]["containers"][0]["resources"] = {"limits": limits}
    if init is not None:
        p["spec"]["initContainers"] = [{"name": "i", "resources": {"limits": init}}]
    return p


def test_every_nvidia_mig_profile_maps_to_its_typed_gpu_gres_by_default() -> None:
    for profile in NVIDIA_MIG_PROFILES:
        assert DEFAULT_GRES_MAPPING[f"nvidia.com/mig-{profile}"] == f"gpu:{profile}"
    assert DEFAULT_GRES_MAPPING["nvidia.com/gpu"] == "gpu"


def test_a_slice_becomes_the_typed_gres_in_the_placeholder_job() -> None:
    p = pod_asking({"nvidia.com/mig-1g.10gb": "1"})
    assert pod_resources(p, S.gres_mapping).gres == {"gpu:1g.10gb": 1}
    spec = translate_group([p], None, [], S)
    assert isinstance(spec, JobSpec)
    assert spec.tres_per_node == "gres/gpu:1g.10gb:1"


def test_whole_gpus_and_slices_of_two_profiles_are_counted_apart() -> None:
    p = pod_asking(
        {"nvidia.com/gpu": "1", "nvidia.com/mig-1g.10gb": "2", "nvidia.com/mig-3g.40gb": "1"}
    )
    spec = translate_group([p], None, [], S)
    assert isinstance(spec, JobSpec)
    assert spec.tres_per_node == "gres/gpu:1,gres/gpu:1g.10gb:2,gres/gpu:3g.40gb:1"


def test_the_config_overrides_a_default_and_adds_a_profile() -> None:
    cfg = parse_config(
        {
            "scheduler": {
                "gresMapping": {
                    "nvidia.com/mig-1g.10gb": "gpu:a100_1g.10gb",
                    "nvidia.com/mig-1g.10gb+me": "gpu:1g.10gb_me",
                }
            }
        },
        env={},
    )
    s = TranslateSettings.from_config(cfg)
    p = pod_asking({"nvidia.com/mig-1g.10gb": "1", "nvidia.com/mig-1g.10gb+me": "1"})
    assert pod_resources(p, s.gres_mapping).gres == {"gpu:a100_1g.10gb": 1, "gpu:1g.10gb_me": 1}
    assert s.gres_mapping["nvidia.com/mig-3g.40gb"] == "gpu:3g.40gb"  # other defaults stay


def test_whole_gpus_may_be_typed_so_a_mixed_node_never_gives_a_whole_gpu_pod_a_slice() -> None:
    cfg = parse_config({"scheduler": {"gresMapping": {"nvidia.com/gpu": "gpu:a100"}}}, env={})
    s = TranslateSettings.from_config(cfg)
    p = pod_asking({"nvidia.com/gpu": "1", "nvidia.com/mig-1g.10gb": "1"})
    assert pod_resources(p, s.gres_mapping).gres == {"gpu:a100": 1, "gpu:1g.10gb": 1}
    # whatever a table passed in says, a whole GPU stays a GPU
    assert pod_resources(pod_asking({"nvidia.com/gpu": "1"}), {"nvidia.com/gpu": "fpga"}).gres == {
        "gpu": 1
    }


@pytest.mark.parametrize(
    ("mapping", "why"),
    [
        pytest.param({"nvidia.com/mig-x": "gpu:1g 10gb"}, "not a Slurm GRES name", id="space"),
        pytest.param({"nvidia.com/mig-x": "gpu:a:b"}, "not a Slurm GRES name", id="two-types"),
        pytest.param({"nvidia.com/mig-x": ""}, "not a Slurm GRES name", id="empty"),
        pytest.param({"fpga": "fpga"}, "not an extended resource name", id="no-domain"),
        pytest.param({"nvidia.com/gpu": "fpga:a100"}, "is not a GPU", id="whole-gpu-not-gpu"),
    ],
)
def test_a_bad_gres_mapping_is_a_config_error_naming_the_key(
    mapping: dict[str, str], why: str
) -> None:
    with pytest.raises((ConfigError, ValidationError)) as e:
        parse_config({"scheduler": {"gresMapping": mapping}}, env={})
    assert "gresMapping" in str(e.value)
    assert why in str(e.value)


UNKNOWN = [
    pytest.param(
        pod_asking({"nvidia.com/mig-9g.99gb": "1"}),
        ["spec.containers[0].resources.limits[nvidia.com/mig-9g.99gb]"],
        id="unknown-profile",
    ),
    pytest.param(
        pod_asking({"cpu": "1"}, init={"nvidia.com/mig-5g.1gb": "1"}),
        ["spec.initContainers[0].resources.limits[nvidia.com/mig-5g.1gb]"],
        id="unknown-profile-in-an-init-container",
    ),
]


@pytest.mark.parametrize(("p", "fields"), UNKNOWN)
def test_translation_refuses_an_unknown_profile_naming_the_field(
    p: dict[str, Any], fields: list[str]
) -> None:
    with pytest.raises(InvalidInput) as e:
        translate_group([p], None, [], S)
    assert e.value.field == fields[0]
    assert "has no Slurm GRES" in e.value.reason
    assert "scheduler.gresMapping" in e.value.reason


@pytest.mark.parametrize(("p", "fields"), UNKNOWN)
def test_admission_refuses_an_unknown_profile_with_the_same_field_and_reason(
    p: dict[str, Any], fields: list[str]
) -> None:
    cfg = parse_config({"managedNamespaces": ["slurm-bridge"]}, env={})
    resp = validate(parse_review(make_review(p)), AdmissionContext(cfg, namespace_labels={}))
    out = resp.to_review()["response"]
    assert out["allowed"] is False
    causes = out["status"]["details"]["causes"]
    assert [c["field"] for c in causes] == fields
    (translated,) = unknown_device_problems(p, S.gres_mapping)
    assert causes[0]["message"].endswith(translated.reason)


def test_admission_allows_a_known_profile_and_unrelated_extended_resources() -> None:
    cfg = parse_config({"managedNamespaces": ["slurm-bridge"]}, env={})
    p = pod_asking({"nvidia.com/mig-1g.10gb": "1", "example.com/other": "1"})
    resp = validate(parse_review(make_review(p)), AdmissionContext(cfg, namespace_labels={}))
    assert resp.to_review()["response"]["allowed"] is True


def test_a_pod_admitted_before_the_table_changed_is_not_blocked_on_update() -> None:
    cfg = parse_config({"managedNamespaces": ["slurm-bridge"]}, env={})
    p = pod_asking({"nvidia.com/mig-9g.99gb": "1"})
    review = make_review(p, operation="UPDATE", old=p)
    resp = validate(parse_review(review), AdmissionContext(cfg, namespace_labels={}))
    assert resp.to_review()["response"]["allowed"] is True
