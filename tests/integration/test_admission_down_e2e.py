"""The admission webhook stopped: the bridge and Kubernetes' controllers carry on.

Real Slurm, the sandbox API server with its fake kubelet, namespace controller and garbage
collector, the real admission server (in-process, over TLS) registered with the webhook
configurations ``helm template`` renders from the chart (``clientConfig.service``, resolved
through an EndpointSlice), and the scheduler and controller talking to the API server as the
chart's ServiceAccounts. Then the webhook stops, as when its pod dies:

(a) a queued pod is bound when a node frees; (b) a deleted, bound pod loses its finalizer
and goes; (c) the managed namespace can be deleted; (d) a user's new pod, and a user's
update, are refused naming the webhook. Once the webhook is back, a new pod is admitted,
routed to the bridge and bound, and users still cannot write the bridge's keys.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from bridge.errors import KubeError, KubeNotFound
from bridge.kube.resources import NAMESPACES, PODS, Resource
from bridge.wellknown import FINALIZER, LABEL_JOB_ID
from tests.integration.bridge_harness import NS, Bridge, job_of, pod, podgroup
from tests.integration.conftest import SlurmSandbox
from tests.integration.webhook_harness import bridge_behind_chart_webhooks

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

MUTATE = "pods.mutate.slurm-bridge.slinky.slurm.net"
VALIDATE = "pods.validate.slurm-bridge.slinky.slurm.net"
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", True)


async def gone(b: Bridge, name: str) -> bool:
    try:
        await b.get_pod(name)
    except KubeNotFound:
        return True
    return False


async def test_with_the_webhook_stopped_the_bridge_and_kubernetes_controllers_carry_on(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    assert len(sandbox.external_nodes) == 3, "the scenario fills the 3-node partition"
    async with bridge_behind_chart_webhooks(sandbox, tmp_path) as (b, hook):
        # Webhook up: the partition fills (one pod per node), a fourth pod queues.
        await podgroup(b, "pg-1", 2, cpu="3", memory="500Mi")
        await b.create_pod("solo", cpu="3", memory="500Mi")
        for name in ("pg-1-0", "pg-1-1", "solo"):
            await b.bound(name)
        await b.create_pod("queued", cpu="3", memory="500Mi")

        async def waits_on_resources() -> str:
            msg = await b.scheduled_message("queued")
            return msg if "Resources" in msg else ""

        await b.wait_for("the queued pod to show Slurm's reason", waits_on_resources)
        solo_job = job_of(await b.get_pod("solo"))

        await hook.stop()

        # (d) new pods and users' updates are refused, naming the webhook
        with pytest.raises(KubeError) as refused:
            await b.create_pod("late")
        assert f'failed calling webhook "{MUTATE}"' in str(refused.value)
        assert "connection refused" in str(refused.value)
        with pytest.raises(KubeError) as update:
            await b.kube.patch_pod(NS, "queued", {"metadata": {"labels": {"team": "a"}}})
        assert f'failed calling webhook "{VALIDATE}"' in str(update.value)

        # (b) a deleted, bound pod: the controller removes its finalizer (its own UPDATE),
        # the kubelet's final DELETE goes through; its Slurm job ends
        await b.kube.delete(PODS, "solo", NS)
        # (the kubelet stand-in stops the containers on SIGTERM at once, as pause does)
        await b.wait_for("the deleted pod to go", lambda: gone(b, "solo"))

        async def solo_job_ended() -> bool:
            return not (await b.slurm.get_job(solo_job)).state.active

        await b.wait_for("the deleted pod's Slurm job to end", solo_job_ended)

        # (a) the freed node goes to the queued pod: link patch and binding as the scheduler
        node = await b.bound("queued")
        assert node in sandbox.external_nodes
        queued = await b.get_pod("queued")
        assert LABEL_JOB_ID in queued["metadata"]["labels"]
        assert FINALIZER in queued["metadata"]["finalizers"]

        # (c) the managed namespace goes: the namespace controller deletes the pods, the
        # controller frees them, the kubelet removes them
        await b.kube.delete(NAMESPACES, NS)

        async def namespace_gone() -> bool:
            try:
                await b.kube.get(NAMESPACES, NS)
            except KubeNotFound:
                return True
            return False

        await b.wait_for("the managed namespace to be deleted", namespace_gone, 60)

        # The webhook is back: everything works as before.
        await hook.start()
        await b.kube.create(NAMESPACES, {"metadata": {"name": NS}})

        async def default_service_account() -> bool:  # the serviceaccount controller's
            with contextlib.suppress(KubeNotFound):
                return bool(await b.kube.get(SERVICE_ACCOUNTS, "default", NS))
            return False

        await b.wait_for("the namespace's default ServiceAccount", default_service_account)
        plain = pod("back")
        del plain["spec"]["schedulerName"]  # the mutating webhook routes it to the bridge
        created = await b.kube.create(PODS, plain, NS)
        assert created["spec"]["schedulerName"] == b.cfg.scheduler_name
        await b.bound("back")
        with pytest.raises(KubeError) as denied:
            await b.kube.patch_pod(NS, "back", {"metadata": {"labels": {LABEL_JOB_ID: "1"}}})
        assert LABEL_JOB_ID in str(denied.value)
