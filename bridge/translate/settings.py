"""The part of the configuration translation needs, as one small frozen model."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bridge.config import DEFAULT_GRES_MAPPING, BridgeConfig
from bridge.translate.topology import TopologyPolicy


class TranslateSettings(BaseModel):
    """Config defaults for translation (lowest precedence, below group and pod annotations)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    partition: str = "slurm-bridge"
    mcs_label: str | None = "kubernetes"
    gres_mapping: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_GRES_MAPPING))
    gang_batch_jobs: bool = True
    jobset_grouping: Literal["jobset", "replicatedJob"] = "jobset"
    gang_sizing: Literal["hetjob", "largest"] = "hetjob"
    priority_from_priority_class: bool = False
    topology: TopologyPolicy = Field(default_factory=TopologyPolicy)

    @classmethod
    def from_config(cls, config: BridgeConfig) -> TranslateSettings:
        s = config.scheduler
        labels = config.topology.node_labels
        return cls(
            partition=config.partition,
            mcs_label=config.mcs_label or None,
            gres_mapping=s.gres_table(),
            gang_batch_jobs=s.gang_batch_jobs,
            jobset_grouping=s.jobset_grouping,
            gang_sizing=s.gang_sizing,
            priority_from_priority_class=s.priority_from_priority_class,
            topology=TopologyPolicy(
                levels=dict(config.topology.levels),
                required_switch_wait_seconds=config.topology.required_switch_wait_seconds,
                preferred_switch_wait_seconds=config.topology.preferred_switch_wait_seconds,
                node_topology_name=labels.name if labels else None,
                node_topology_labels=labels.labels if labels else (),
            ),
        )
