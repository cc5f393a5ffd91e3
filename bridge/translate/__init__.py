"""Pure translation: pods + group object + nodes -> one Slurm placeholder JobSpec.

No I/O, no clock, no client: callers read the objects and pass them in as dicts.
"""

from bridge.translate.annotations import (
    SlurmJobOptions,
    annotation_errors,
    parse_slurmjob_annotations,
)
from bridge.translate.grouping import (
    GroupRef,
    ObjectRef,
    expected_size,
    group_of,
    is_complete,
    order_pods,
)
from bridge.translate.identity import (
    admin_comment,
    human_comment,
    parse_admin_comment,
    pod_belongs,
    pod_job_id,
)
from bridge.translate.job import Waiting, translate_group
from bridge.translate.placement import (
    NodeSet,
    excluded_nodes,
    pod_fits_node,
    slurm_node_name,
)
from bridge.translate.quantity import parse_quantity
from bridge.translate.resources import PodResources, pod_resources
from bridge.translate.settings import TranslateSettings

__all__ = [
    "GroupRef",
    "NodeSet",
    "ObjectRef",
    "PodResources",
    "SlurmJobOptions",
    "TranslateSettings",
    "Waiting",
    "admin_comment",
    "annotation_errors",
    "excluded_nodes",
    "expected_size",
    "group_of",
    "human_comment",
    "is_complete",
    "order_pods",
    "parse_admin_comment",
    "parse_quantity",
    "parse_slurmjob_annotations",
    "pod_belongs",
    "pod_fits_node",
    "pod_job_id",
    "pod_resources",
    "slurm_node_name",
    "translate_group",
]
