"""Every label, annotation, finalizer, taint and condition key the bridge reads or writes.

The keys are upstream slurm-bridge's (SchedMD Slinky), unchanged, so users can move over.
"""

from __future__ import annotations

# --- prefixes -------------------------------------------------------------------------
SLINKY = "slinky.slurm.net/"
SCHEDULER_PREFIX = "scheduler.slinky.slurm.net/"
SLURMJOB_PREFIX = "slurmjob.slinky.slurm.net/"
TOPOLOGY_PREFIX = "topology.slinky.slurm.net/"

# --- written by the bridge on pods ----------------------------------------------------
# Pod label: the Slurm job id of the placeholder job (same on every pod of a group).
LABEL_JOB_ID = SCHEDULER_PREFIX + "slurm-jobid"
# Pod annotation: the Kubernetes node the bridge chose for this pod.
ANNOTATION_SLURM_NODE = SLINKY + "slurm-node"
# Pod finalizer: held until the pod's Slurm job has ended, so no allocation leaks.
FINALIZER = SCHEDULER_PREFIX + "finalizer"
# Pod annotation: the hash of the job spec the pod's job (its job-id label) was made from,
# so a restarted scheduler knows a pending job's spec without reading the job.
ANNOTATION_SPEC_HASH = SCHEDULER_PREFIX + "spec-hash"
# Pod annotation: when Slurm expects the pod's pending job to start (RFC 3339, UTC), from
# its backfill plan; absent when Slurm has none, and removed when the job starts
# (docs/why-pending.md).
ANNOTATION_EXPECTED_START = SLINKY + "expected-start"
# Pod annotation beside it: who made that plan, "slurm" (Slurm's backfill, the job's
# start_time) or "slurm-bridge" (the bridge's per-CPU plan of Slurm's queue, where Slurm's
# reserves whole nodes: bridge.queueplan).
ANNOTATION_EXPECTED_START_BY = SLINKY + "expected-start-by"
# ResourceClaim finalizer: held while the claim is allocated (whoever allocates adds it,
# whoever deallocates removes it), as kube-scheduler and kube-controller-manager do.
CLAIM_DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
# Toleration key on managed pods / taint key on bridge nodes (value: the scheduler name).
MANAGED_NODE_TAINT = SLINKY + "managed-node"

# --- read from nodes ------------------------------------------------------------------
# Node label: the Slurm node name when it differs from the Kubernetes node name.
LABEL_SLURM_NODENAME = SLINKY + "slurm-nodename"
# Node label: register this Kubernetes node in Slurm as a State=EXTERNAL node.
LABEL_EXTERNAL_NODE = SCHEDULER_PREFIX + "external-node"
# Node annotation: comma-separated partitions for an external node.
ANNOTATION_EXTERNAL_NODE_PARTITIONS = SCHEDULER_PREFIX + "external-node-partitions"
# Node annotation: Slurm topology string.
ANNOTATION_TOPOLOGY_SPEC = TOPOLOGY_PREFIX + "spec"

# --- written by the bridge on nodes ---------------------------------------------------
# Node annotation: the controller cordoned this node because Slurm drained it
# (controller.cordonOnSlurmDrain); only such cordons are ever undone by the bridge.
ANNOTATION_CORDONED_BY_BRIDGE = SCHEDULER_PREFIX + "cordoned-by-bridge"
# Slurm node comment on external nodes the bridge registered: this prefix + mcsLabel.
# Only nodes carrying it (for our mcsLabel) are ever drained/deleted by the bridge.
EXTERNAL_NODE_COMMENT_PREFIX = "slurm-bridge:external-node:"
# Event reasons on Nodes.
EVENT_EXTERNAL_NODE_INVALID = "ExternalNodeInvalid"
EVENT_EXTERNAL_NODE_REGISTERED = "ExternalNodeRegistered"
EVENT_EXTERNAL_NODE_NO_GPUS = "ExternalNodeGpusNotRegistered"
EVENT_EXTERNAL_NODE_PARTITION = "ExternalNodePartitionMissing"
EVENT_EXTERNAL_NODE_REJECTED = "ExternalNodeRejected"
EVENT_EXTERNAL_NODE_TOPOLOGY = "ExternalNodeTopologyRejected"

# --- user annotations (pod or group object) -------------------------------------------
# Every key upstream accepts under slurmjob.slinky.slurm.net/; bridge.translate parses them.
SLURMJOB_KEYS = (
    "account",
    "constraints",
    "cpu-per-task",
    "exclusive",
    "gres",
    "group-id",
    "job-name",
    "licenses",
    "max-nodes",
    "mem-per-node",
    "min-nodes",
    "partition",
    "priority",
    "qos",
    "reservation",
    "timelimit",
    "user-id",
    "wckey",
)
# Keys of ours under the same prefix: the workload's topology request (docs/topology.md).
# segment: topology/block segment size (sbatch --segment); switches: topology/tree
# "count[@max-time]" (sbatch --switches).
BRIDGE_SLURMJOB_KEYS = ("segment", "switches")
# Kueue TAS annotations on a pod template (the value is a topology level: a node label).
ANNOTATION_KUEUE_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
ANNOTATION_KUEUE_PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
# The old (v0.x) spelling of the job-name annotation, still accepted.
LEGACY_ANNOTATION_JOB_NAME = SLINKY + "job-name"

# --- workload grouping keys (set by other controllers) --------------------------------
LABEL_POD_GROUP = "scheduling.x-k8s.io/pod-group"
LABEL_LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LABEL_LWS_GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
LABEL_LWS_GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
LABEL_LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
ANNOTATION_LWS_SIZE = "leaderworkerset.sigs.k8s.io/size"
LABEL_JOB_NAME = "batch.kubernetes.io/job-name"
LABEL_JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
ANNOTATION_JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
LABEL_JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
LABEL_JOBSET_REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
LABEL_JOBSET_JOB_INDEX = "jobset.sigs.k8s.io/job-index"

# --- conditions and event reasons written by the bridge -------------------------------
CONDITION_POD_SCHEDULED = "PodScheduled"
# A condition type of our own, set when the Slurm job ended while the pod still ran.
CONDITION_SLURM_JOB_ENDED = "slinky.slurm.net/SlurmJobEnded"
# Kubernetes' own condition for "ended by something outside the workload" (kube-scheduler's
# preemption, the taint manager, the Eviction API and PodGC set it): a Job's
# podFailurePolicy ``onPodConditions`` can tell such pods from program failures.
CONDITION_DISRUPTION_TARGET = "DisruptionTarget"
# Node condition (upstream's name): do the Slurm node's GRES and the node's devices (its
# ResourceSlices, else its allocatable extended resources) agree? Reasons and the Warning
# event: bridge.devices.node_gres (SlurmGRESCompatible, IncompatibleSlurmGRES,
# SlurmGRESVerificationError).
CONDITION_SLURM_GRES_COMPATIBLE = "SlinkySlurmGRESCompatible"
# Node taint set when Slurm reports the node DOWN, DRAIN or FAIL.
TAINT_SLURM_NODE_UNAVAILABLE = SLINKY + "slurm-node-unavailable"
# Prefix of Slurm node reasons the bridge sets (only these drains are undone by uncordon).
SLURM_REASON_PREFIX = "slurm-bridge: "
# Event reason on a pod whose job-id label names a Slurm job that is not its own.
REASON_FOREIGN_JOB_LABEL = "ForeignSlurmJobLabel"


def slurmjob_annotation(key: str) -> str:
    """The full annotation name for a ``slurmjob.slinky.slurm.net/`` key."""
    return SLURMJOB_PREFIX + key


# --- API versions of the group objects translation reads --------------------------------
API_POD_GROUP = "scheduling.x-k8s.io/v1alpha1"  # coscheduling PodGroup (kind PodGroup)
API_WORKLOAD_POD_GROUP = "scheduling.k8s.io/v1alpha2"  # built-in PodGroup (Kubernetes 1.36)
API_WORKLOAD = "scheduling.k8s.io/v1alpha2"  # built-in Workload (Kubernetes 1.36)
API_LWS = "leaderworkerset.x-k8s.io/v1"
API_JOBSET = "jobset.x-k8s.io/v1alpha2"
API_JOB = "batch/v1"
