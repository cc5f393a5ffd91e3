"""Which gang a pod belongs to, how big the gang must be, and the order of its pods.

One adapter per workload kind, tried in this order (the first that claims the pod wins):

=================  ==================================================  =====================
kind               how a pod is recognised                             group name
=================  ==================================================  =====================
PodGroup           label ``scheduling.x-k8s.io/pod-group``             the PodGroup's name
Workload           ``spec.schedulingGroup.podGroupName`` names a       the Workload's name
                   built-in PodGroup made from a Workload of several
                   podGroupTemplates (``workloads`` maps it)
WorkloadPodGroup   ``spec.schedulingGroup.podGroupName``               the PodGroup's name
LeaderWorkerSet    labels ``leaderworkerset.sigs.k8s.io/name`` +       ``<lws>-<groupIndex>``
                   ``group-index``
JobSet             label ``jobset.sigs.k8s.io/jobset-name``            ``<jobset>`` or
                                                                       ``<jobset>-<rjob>``
Job                controller owner is a batch/v1 Job with             the Job's name
                   parallelism > 1 (or Indexed, when the Job is
                   not known) and ``scheduler.gangBatchJobs``
Pod                anything else (one Slurm job per pod)               the pod's name
=================  ==================================================  =====================

``workloads`` maps a built-in PodGroup's name -> the name of the Workload whose PodGroups
make one gang (:func:`gang_workload` decides it from the two objects, which the caller
reads); a pod of any other built-in PodGroup is that PodGroup's gang.

``owners`` maps uid -> owner object (Job, JobSet, StatefulSet, LWS, leader pod ...) for
whatever the caller could read; the controller chain is walked through it to the root.

A group's uid is never taken from a pod's ownerReference text (Kubernetes checks only that
it is not empty: a pod may name any uid, another namespace's included). An owner counts
only when ``owners`` holds an object of that uid, kind and name **in the pod's own
namespace**; otherwise the uid is left unknown and is read from the group's object (found
by kind, namespace and name), and :func:`check_source` refuses a pod whose ownerReference
disagrees with that object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from bridge.errors import InvalidInput
from bridge.models import GroupId, GroupKind
from bridge.translate import kobj
from bridge.translate.settings import TranslateSettings
from bridge.wellknown import (
    ANNOTATION_JOB_COMPLETION_INDEX,
    ANNOTATION_LWS_SIZE,
    API_JOB,
    API_JOBSET,
    API_LWS,
    API_POD_GROUP,
    API_WORKLOAD,
    API_WORKLOAD_POD_GROUP,
    LABEL_JOB_COMPLETION_INDEX,
    LABEL_JOBSET_JOB_INDEX,
    LABEL_JOBSET_NAME,
    LABEL_JOBSET_REPLICATED_JOB,
    LABEL_LWS_GROUP_INDEX,
    LABEL_LWS_NAME,
    LABEL_LWS_WORKER_INDEX,
    LABEL_POD_GROUP,
)

Owners = Mapping[str, Mapping[str, Any]]  # uid -> object


class ObjectRef(BaseModel):
    """An object to read: enough to GET it (uid when known)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str | None = None


class GroupRef(BaseModel):
    """A pod's group: its identity, and the object that describes it (``source``).

    ``source`` is None for a plain pod. For a pod of a Job that is not a gang, ``kind``
    is ``Pod`` but ``source`` is the Job (its annotations and deadline still apply).
    ``uid`` is the group's uid when known without reading ``source``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: GroupKind
    namespace: str
    name: str
    uid: str | None = None
    source: ObjectRef | None = None
    replicated_job: str | None = None  # JobSet split per replicated job

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"

    def group_id(self, source_object: Mapping[str, Any] | None) -> GroupId:
        """The stable identity, taking the uid from ``source_object`` when not known."""
        uid = self.uid or (kobj.uid(source_object) if source_object else "") or ""
        return GroupId(kind=self.kind, namespace=self.namespace, name=self.name, uid=uid)


def _controller_ref(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    refs = [r for r in kobj.sequence(obj, "metadata", "ownerReferences") if isinstance(r, Mapping)]
    for ref in refs:
        if ref.get("controller") is True:
            return ref
    return refs[0] if refs else None


def owner_of(
    owners: Owners, namespace: str, kind: str, name: str, uid: str
) -> Mapping[str, Any] | None:
    """The object ``owners`` holds for ``uid``, only when it is that ``kind`` and ``name`` in
    ``namespace`` (an ownerReference's uid alone proves nothing: it is the pod's own text)."""
    obj = owners.get(uid) if uid else None
    if obj is None or kobj.namespace(obj) != namespace or kobj.name(obj) != name:
        return None
    if kobj.uid(obj) != uid or kobj.text(obj, "kind") not in ("", kind):
        return None
    return obj


def owner_chain(obj: Mapping[str, Any], owners: Owners) -> list[ObjectRef]:
    """The controller owners of ``obj``, nearest first, as far as ``owners`` reaches. An
    entry's ``uid`` is set only when ``owners`` holds that very object in ``obj``'s
    namespace (:func:`owner_of`); the chain stops at the first owner it does not hold."""
    chain: list[ObjectRef] = []
    ns = kobj.namespace(obj)
    seen: set[str] = set()
    current: Mapping[str, Any] | None = obj
    while current is not None:
        ref = _controller_ref(current)
        if ref is None:
            break
        uid = kobj.text(ref, "uid")
        if uid in seen:  # a cycle: stop rather than loop
            break
        seen.add(uid)
        kind, name = kobj.text(ref, "kind"), kobj.text(ref, "name")
        current = owner_of(owners, ns, kind, name, uid)
        chain.append(
            ObjectRef(
                api_version=kobj.text(ref, "apiVersion"),
                kind=kind,
                namespace=ns,
                name=name,
                uid=uid if current is not None else None,
            )
        )
    return chain


def _find(chain: Sequence[ObjectRef], kind: str) -> ObjectRef | None:
    return next((r for r in chain if r.kind == kind), None)


def _int_label(values: Mapping[str, str], key: str) -> int | None:
    raw = values.get(key, "")
    return int(raw) if raw.isdigit() and len(raw) < 10 else None


def _job_parallelism(job_spec: Any) -> int:
    """Pods of a Job that run at the same time: min(parallelism, completions)."""
    parallelism = kobj.integer(job_spec, "parallelism")
    parallelism = 1 if parallelism is None else parallelism
    completions = kobj.integer(job_spec, "completions")
    return parallelism if completions is None else min(parallelism, completions)


def podgroup_name(pod: Mapping[str, Any]) -> str:
    """The built-in PodGroup a pod names (``spec.schedulingGroup.podGroupName``), or ""."""
    return kobj.text(pod, "spec", "schedulingGroup", "podGroupName")


def workload_ref(podgroup: Mapping[str, Any] | None) -> tuple[str, str]:
    """The (Workload, podGroupTemplate) a built-in PodGroup was made from, ("", "") when
    none: ``spec.podGroupTemplateRef.workload`` in 1.36's v1alpha2 (``workloadName``,
    ``podGroupTemplateName``), ``spec.workloadRef`` (``workloadName``, ``templateName``)
    in the later versions."""
    if podgroup is None:
        return "", ""
    spec = kobj.get(podgroup, "spec")
    if name := kobj.text(spec, "podGroupTemplateRef", "workload", "workloadName"):
        return name, kobj.text(spec, "podGroupTemplateRef", "workload", "podGroupTemplateName")
    return kobj.text(spec, "workloadRef", "workloadName"), kobj.text(
        spec, "workloadRef", "templateName"
    )


def workload_templates(workload: Mapping[str, Any] | None) -> list[str]:
    """The names of a built-in Workload's ``spec.podGroupTemplates``, in spec order."""
    return [kobj.text(t, "name") for t in kobj.sequence(workload, "spec", "podGroupTemplates")]


def gang_workload(podgroup: Mapping[str, Any] | None, workload: Mapping[str, Any] | None) -> str:
    """The Workload whose PodGroups make ONE gang with ``podgroup``'s pods, or "": a
    Workload of several ``podGroupTemplates`` that names the template ``podgroup`` was
    made from. A Workload of one template keeps each of its PodGroups a gang of its own
    (the PodGroups of one template are replicas, placed independently)."""
    name, template = workload_ref(podgroup)
    if not name or workload is None or kobj.name(workload) != name:
        return ""
    if kobj.namespace(workload) != kobj.namespace(podgroup or {}):
        return ""
    templates = workload_templates(workload)
    return name if len(templates) > 1 and template in templates else ""


def group_of(
    pod: Mapping[str, Any],
    owners: Owners,
    settings: TranslateSettings | None = None,
    workloads: Mapping[str, str] | None = None,
) -> GroupRef:
    """The group a pod belongs to (see the module table)."""
    s = settings or TranslateSettings()
    ns = kobj.namespace(pod)
    labels = kobj.labels(pod)
    chain = owner_chain(pod, owners)

    if pod_group := labels.get(LABEL_POD_GROUP):
        src = ObjectRef(api_version=API_POD_GROUP, kind="PodGroup", namespace=ns, name=pod_group)
        return GroupRef(kind="PodGroup", namespace=ns, name=pod_group, source=src)

    if wpg := podgroup_name(pod):
        if wl := (workloads or {}).get(wpg):
            src = ObjectRef(api_version=API_WORKLOAD, kind="Workload", namespace=ns, name=wl)
            return GroupRef(kind="Workload", namespace=ns, name=wl, source=src)
        src = ObjectRef(api_version=API_WORKLOAD_POD_GROUP, kind="PodGroup", namespace=ns, name=wpg)
        return GroupRef(kind="WorkloadPodGroup", namespace=ns, name=wpg, source=src)

    lws = labels.get(LABEL_LWS_NAME)
    if lws and LABEL_LWS_GROUP_INDEX in labels:
        ref = _find(chain, "LeaderWorkerSet")
        uid = ref.uid if ref else None
        src = ObjectRef(
            api_version=API_LWS, kind="LeaderWorkerSet", namespace=ns, name=lws, uid=uid
        )
        name = f"{lws}-{labels[LABEL_LWS_GROUP_INDEX]}"
        return GroupRef(kind="LeaderWorkerSet", namespace=ns, name=name, uid=uid, source=src)

    if jobset := labels.get(LABEL_JOBSET_NAME):
        ref = _find(chain, "JobSet")
        uid = ref.uid if ref else None
        src = ObjectRef(api_version=API_JOBSET, kind="JobSet", namespace=ns, name=jobset, uid=uid)
        rjob = labels.get(LABEL_JOBSET_REPLICATED_JOB)
        if s.jobset_grouping == "replicatedJob" and rjob:
            return GroupRef(
                kind="JobSet",
                namespace=ns,
                name=f"{jobset}-{rjob}",
                uid=uid,
                source=src,
                replicated_job=rjob,
            )
        return GroupRef(kind="JobSet", namespace=ns, name=jobset, uid=uid, source=src)

    if chain and chain[0].kind == "Job":
        job_ref = chain[0].model_copy(update={"api_version": chain[0].api_version or API_JOB})
        job = owner_of(owners, ns, "Job", job_ref.name, job_ref.uid or "")
        if job is not None:
            gang = _job_parallelism(kobj.get(job, "spec")) > 1
        else:
            gang = LABEL_JOB_COMPLETION_INDEX in labels
        if s.gang_batch_jobs and gang:
            return GroupRef(
                kind="Job", namespace=ns, name=job_ref.name, uid=job_ref.uid, source=job_ref
            )
        return GroupRef(
            kind="Pod", namespace=ns, name=kobj.name(pod), uid=kobj.uid(pod), source=job_ref
        )

    return GroupRef(kind="Pod", namespace=ns, name=kobj.name(pod), uid=kobj.uid(pod))


def check_source(
    ref: GroupRef, source_object: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]]
) -> None:
    """Refuse pods whose ownerReference names the group's object (``ref.source``, by kind
    and name) when that object does not exist in their namespace, or has another uid: the
    reference is the pod's own text, and Kubernetes checks only that its uid is not empty.
    Raises InvalidInput naming the pod and the field."""
    src = ref.source
    if src is None:
        return
    real_uid = kobj.uid(source_object) if source_object is not None else ""
    for pod in pods:
        for i, oref in enumerate(kobj.sequence(pod, "metadata", "ownerReferences")):
            if kobj.text(oref, "kind") != src.kind or kobj.text(oref, "name") != src.name:
                continue
            where = f"{src.kind} {src.namespace}/{src.name}"
            if source_object is None:
                raise InvalidInput(
                    f"metadata.ownerReferences[{i}]",
                    f"names {where}, which does not exist in namespace {src.namespace}",
                    kobj.describe(pod, "Pod"),
                )
            if kobj.text(oref, "uid") != real_uid:
                raise InvalidInput(
                    f"metadata.ownerReferences[{i}].uid",
                    f"{kobj.text(oref, 'uid')[:64]!r} is not the uid of {where}",
                    kobj.describe(pod, "Pod"),
                )


def missing_source(ref: GroupRef, pods: Sequence[Mapping[str, Any]], workload: str = "") -> str:
    """Why a group whose object does not exist waits, naming the field that names it;
    ``workload``: the Workload a built-in PodGroup names, which does not exist (yet)."""
    src = ref.source
    if src is None:
        return ""
    if workload:
        return (
            f"waiting for Workload {src.namespace}/{workload} (spec.podGroupTemplateRef."
            f"workload.workloadName of PodGroup {src.namespace}/{src.name}): it does not exist"
        )
    field = {
        "PodGroup": f"metadata.labels[{LABEL_POD_GROUP}]",
        "WorkloadPodGroup": "spec.schedulingGroup.podGroupName",
        "LeaderWorkerSet": f"metadata.labels[{LABEL_LWS_NAME}]",
        "JobSet": f"metadata.labels[{LABEL_JOBSET_NAME}]",
    }.get(ref.kind, "metadata.ownerReferences")
    return (
        f"waiting for {src.kind} {src.namespace}/{src.name} ({field} of "
        f"{len(pods)} pod{'s' if len(pods) != 1 else ''}): it does not exist"
    )


def _min_count(podgroup_spec: Any) -> int:
    """A built-in PodGroup's gang size: ``schedulingPolicy.gang.minCount`` (1 for a
    ``basic`` policy)."""
    for path in (("schedulingPolicy", "gang", "minCount"), ("policy", "gang", "minCount")):
        n = kobj.integer(podgroup_spec, *path)
        if n is not None and n > 0:
            return n
    return 1


def workload_podgroups(
    workload: Mapping[str, Any] | None, pod_groups: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """The PodGroups of ``pod_groups`` that are ``workload``'s gang (:func:`gang_workload`),
    in the order of their templates in the Workload, then by name."""
    templates = workload_templates(workload)
    mine = [pg for pg in pod_groups if gang_workload(pg, workload)]
    return sorted(mine, key=lambda pg: (templates.index(workload_ref(pg)[1]), kobj.name(pg)))


def _workload_size(
    workload: Mapping[str, Any] | None, pod_groups: Sequence[Mapping[str, Any]]
) -> int | None:
    """Every PodGroup's minCount, and at least one pod for each template no PodGroup was
    made from yet: the gang never starts before every part of the Workload is there."""
    if workload is None:
        return None
    mine = workload_podgroups(workload, pod_groups)
    made = {workload_ref(pg)[1] for pg in mine}
    missing = sum(1 for t in workload_templates(workload) if t not in made)
    return sum(_min_count(kobj.get(pg, "spec")) for pg in mine) + missing


def expected_size(
    ref: GroupRef,
    group_object: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]],
    pod_groups: Sequence[Mapping[str, Any]] = (),
) -> int | None:
    """How many pods the group needs before it can be submitted; None = not known yet
    (the group object has not been read or does not exist). ``pod_groups``: the built-in
    PodGroups of the group's namespace, read for a Workload gang only."""
    if ref.kind == "Pod":
        return 1
    if ref.kind == "Workload":
        return _workload_size(group_object, pod_groups)
    if ref.kind == "LeaderWorkerSet":
        size = kobj.integer(group_object, "spec", "leaderWorkerTemplate", "size")
        if size is None:
            sizes = {kobj.annotations(p).get(ANNOTATION_LWS_SIZE, "") for p in pods}
            digits = [int(x) for x in sizes if x.isdigit() and len(x) < 10]
            size = max(digits) if digits else None
        return size
    if group_object is None:
        return None
    spec = kobj.get(group_object, "spec")
    if ref.kind == "PodGroup":
        n = kobj.integer(spec, "minMember")
        return n if n is not None and n > 0 else 1
    if ref.kind == "WorkloadPodGroup":
        return _min_count(spec)
    if ref.kind == "Job":
        return _job_parallelism(spec)
    # JobSet: replicas x pods per Job, over the (selected) replicated jobs.
    total = 0
    for rj in kobj.sequence(spec, "replicatedJobs"):
        if ref.replicated_job is not None and kobj.text(rj, "name") != ref.replicated_job:
            continue
        replicas = kobj.integer(rj, "replicas")
        replicas = 1 if replicas is None else replicas
        total += replicas * _job_parallelism(kobj.get(rj, "template", "spec"))
    return total or None


def is_complete(
    ref: GroupRef,
    group_object: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]],
    pod_groups: Sequence[Mapping[str, Any]] = (),
) -> bool:
    size = expected_size(ref, group_object, pods, pod_groups)
    return size is not None and len(pods) >= size


def _completion_index(pod: Mapping[str, Any]) -> int:
    labels = kobj.labels(pod)
    idx = _int_label(labels, LABEL_JOB_COMPLETION_INDEX)
    if idx is None:
        idx = _int_label(kobj.annotations(pod), ANNOTATION_JOB_COMPLETION_INDEX)
    return -1 if idx is None else idx


def order_pods(
    ref: GroupRef,
    group_object: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]],
    pod_groups: Sequence[Mapping[str, Any]] = (),
) -> list[Mapping[str, Any]]:
    """Pods in a deterministic order: LWS leader first then worker index; Job by
    completion index; JobSet by replicated job (spec order), job index, completion
    index; a Workload by its PodGroups (:func:`workload_podgroups`), then by name;
    otherwise by name. Ties break on the pod name."""
    if ref.kind == "Workload":
        rank = {
            kobj.name(pg): i for i, pg in enumerate(workload_podgroups(group_object, pod_groups))
        }
        return sorted(
            pods,
            key=lambda p: (rank.get(podgroup_name(p), len(rank)), podgroup_name(p), kobj.name(p)),
        )
    if ref.kind == "LeaderWorkerSet":
        return sorted(
            pods,
            key=lambda p: (_int_label(kobj.labels(p), LABEL_LWS_WORKER_INDEX) or 0, kobj.name(p)),
        )
    if ref.kind == "Job":
        return sorted(pods, key=lambda p: (_completion_index(p), kobj.name(p)))
    if ref.kind == "JobSet":
        rjobs = [
            kobj.text(rj, "name") for rj in kobj.sequence(group_object, "spec", "replicatedJobs")
        ]

        def jobset_key(p: Mapping[str, Any]) -> tuple[int, str, int, int, str]:
            labels = kobj.labels(p)
            rj = labels.get(LABEL_JOBSET_REPLICATED_JOB, "")
            pos = rjobs.index(rj) if rj in rjobs else len(rjobs)
            job_index = _int_label(labels, LABEL_JOBSET_JOB_INDEX)
            return (
                pos,
                rj,
                -1 if job_index is None else job_index,
                _completion_index(p),
                kobj.name(p),
            )

        return sorted(pods, key=jobset_key)
    return sorted(pods, key=kobj.name)
