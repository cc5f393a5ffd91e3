"""Pure translation: pods + group object + nodes -> one Slurm placeholder JobSpec.

No I/O, no clock, no client: callers read the objects and pass them in as dicts.
"""

# the object readers are bridge.kobj (the workload kinds read objects too); translation
# and its callers import them from here, first, before any module of this package
from bridge import kobj
from bridge.translate.annotations import (
    SlurmJobOptions,
    annotation_errors,
    parse_slurmjob_annotations,
)
from bridge.translate.grouping import (
    GroupRef,
    ObjectRef,
    check_source,
    expected_size,
    group_of,
    is_complete,
    missing_source,
    order_pods,
)
from bridge.translate.identity import (
    BackLink,
    admin_comment,
    back_link,
    foreign_label_message,
    group_of_link,
    human_comment,
    job_names_pod,
    link_is_ours,
    link_names_group,
    names_any_pod,
    parse_admin_comment,
    pod_belongs,
    pod_job_id,
)
from bridge.translate.job import PodTemplates, Waiting, translate_group
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
    "BackLink",
    "GroupRef",
    "NodeSet",
    "ObjectRef",
    "PodResources",
    "PodTemplates",
    "SlurmJobOptions",
    "TranslateSettings",
    "Waiting",
    "admin_comment",
    "annotation_errors",
    "back_link",
    "check_source",
    "excluded_nodes",
    "expected_size",
    "foreign_label_message",
    "group_of",
    "group_of_link",
    "human_comment",
    "is_complete",
    "job_names_pod",
    "kobj",
    "link_is_ours",
    "link_names_group",
    "missing_source",
    "names_any_pod",
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
