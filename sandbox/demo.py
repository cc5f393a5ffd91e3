"""``slurm-bridge sandbox demo up|down|status``: the README's demo, driven from Python.

``up`` (idempotent: it first stops whatever a previous run left) needs a running Slurm
sandbox (``slurm-bridge sandbox slurm up``; its env file is ``$SLURM_SANDBOX_ENV`` or
``<SLURM_BRIDGE_SANDBOX_DIR>/cluster.env``) and then, under the demo dir
(``<Slurm sandbox dir>/demo``, or ``--dir``):

1. writes a CA and a serving certificate for the webhook (``tls/``), the bridge's config
   (``config.yaml``: the sandbox's slurmrestd URL and JWT file, managed namespace
   ``slurm-bridge``) and the kubeconfig (``kubeconfig``);
2. starts the sandbox Kubernetes API server (``slurm-bridge sandbox kube-api up``, with its
   fake kubelet) with one Ready node per Slurm external node (``kube-node-0..2``);
3. starts ``slurm-bridge admission``, registers it with the webhook Service and
   configurations ``helm template`` renders from the chart (an EndpointSlice points the
   Service at the webhook; the CA is the ``caBundle``; :mod:`sandbox.chart_webhooks`),
   applies the managed namespace, and starts ``slurm-bridge scheduler`` and ``controller``
   (logs: ``logs/<component>.log``);
4. runs the seed examples (``deploy/examples``) with ``kubectl``, printing ``squeue`` beside
   ``kubectl get pods -o wide`` and the PodScheduled message of every pending pod:
   the pause pod; PodGroup pg-1 (2 pods, minMember 2) and a second group pg-2 that waits
   with Slurm's reason ``Resources`` until pg-1 finishes; a JobSet; a LeaderWorkerSet.

Two stand-ins replace parts of a cluster the sandbox does not have, and say so in the
output: **the kubelet** (containers "finish" when the demo calls the sandbox's
``POST /sandbox/pods/{ns}/{name}/finish``, also ``slurm-bridge sandbox kube-api finish-pod``)
and **the Job/JobSet/LWS controllers** (``slurm-bridge sandbox workloads``, started beside
the components, creates the Jobs and pods those controllers would for every Job, JobSet and
LWS applied, with their labels and owner references:
:mod:`sandbox.controllers.workload_controller`).

Every command the output shows is one the user can paste as it is (after the ``export``
lines it prints: KUBECONFIG, the sandbox dir, PATH). The last step finishes the LWS, so the
demo ends with every Slurm node free for the user's own workloads.

Every wait has a deadline; a step that does not happen in time fails the run (exit 1)
with a message naming it. ``down`` stops the components and the API server and cancels
the demo's Slurm jobs; the Slurm sandbox itself keeps running.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from bridge.devices.mig import nvidia_mig_gpu
from bridge.slurm.hostlist import expand as expand_hostlist
from bridge.wellknown import CONDITION_POD_SCHEDULED, LABEL_JOB_ID
from sandbox import chart_rbac, chart_webhooks, cluster_cli
from sandbox.controllers import dra_driver, workload_controller, workload_pods
from sandbox.kubeapi.server import kubeconfig_for
from sandbox.slurm.launcher import parse_env_file
from sandbox.slurm.mig import MigLayout

NAMESPACE = "slurm-bridge"
COMPONENTS = ("admission", "scheduler", "controller")
STAND_IN = "workloads"  # the Job/JobSet/LWS controllers' stand-in (a process too)
DEFAULT_DEADLINE = 30.0
SQUEUE_FORMAT = "%.6i %.10j %.9T %.4D %R"
POLL = 0.2
_JSON_HEADERS = {"Content-Type": "application/json"}
# the Slurm job names of the demo's groups (leftovers of a run whose API server died)
DEMO_JOB_NAMES = ("pause", "pg-1", "pg-2", "js-1", "lws-1-0", "indexed-1")


# who the Job/JobSet/LWS controllers' stand-in creates Jobs and pods as (webhooks see it)
STAND_IN_USER = "system:serviceaccount:kube-system:job-controller"


class DemoFailed(Exception):
    """A demo step did not happen (the message names the step and what was seen)."""


# ------------------------------------------------------------------------------ environment
@dataclass(frozen=True)
class DemoEnv:
    """Where things are: the Slurm sandbox's env file, the demo dir, the tools."""

    slurm: Mapping[str, str]  # the parsed cluster.env
    demo_dir: Path
    examples: Path = workload_pods.EXAMPLES
    python: str = sys.executable

    @classmethod
    def load(cls, environ: Mapping[str, str], demo_dir: str | None = None) -> DemoEnv:
        env_path = environ.get("SLURM_SANDBOX_ENV") or str(
            Path(
                environ.get("SLURM_BRIDGE_SANDBOX_DIR")
                or Path.home() / ".cache" / "slurm-bridge" / "slurm"
            )
            / "cluster.env"
        )
        try:
            slurm = parse_env_file(Path(env_path).read_text())
        except OSError as e:
            raise DemoFailed(
                f"no Slurm sandbox env file at {env_path} ({e.strerror}): "
                "run `slurm-bridge sandbox slurm up` first"
            ) from e
        base = Path(demo_dir) if demo_dir else Path(slurm["SLURM_SANDBOX_DIR"]) / "demo"
        return cls(slurm=slurm, demo_dir=base)

    @property
    def kubeconfig(self) -> Path:
        return self.demo_dir / "kubeconfig"

    @property
    def config_file(self) -> Path:
        return self.demo_dir / "config.yaml"

    @property
    def kube_api_dir(self) -> Path:
        return self.demo_dir / "kube-api"

    @property
    def nodes(self) -> list[str]:
        return expand_hostlist(self.slurm["SLURM_EXTERNAL_NODES"])

    @property
    def partition(self) -> str:
        return self.slurm["SLURM_PARTITION"]

    @property
    def kubectl(self) -> str:
        here = Path(self.python).parent / "kubectl"
        return str(here) if here.exists() else "kubectl"

    def child_env(self) -> dict[str, str]:
        """The environment of every command the demo runs: this Slurm sandbox, this
        demo's API server state dir and kubeconfig."""
        env = dict(os.environ)
        env["SLURM_BRIDGE_SANDBOX_DIR"] = self.slurm["SLURM_SANDBOX_DIR"]
        env["SLURM_SANDBOX_KUBE_API_DIR"] = str(self.kube_api_dir)
        env["KUBECONFIG"] = str(self.kubeconfig)
        return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ------------------------------------------------------------------------------ results
@dataclass
class DemoResult:
    """What each step showed, for the CI test and the final summary."""

    bound: dict[str, str] = field(default_factory=dict)  # pod -> node
    job_ids: dict[str, int] = field(default_factory=dict)  # pod -> Slurm job id
    waiting_messages: dict[str, str] = field(default_factory=dict)  # pod -> PodScheduled msg
    squeue: dict[str, str] = field(default_factory=dict)  # step -> squeue output
    tolerations: dict[str, list[Any]] = field(default_factory=dict)  # pod -> tolerations
    status: dict[str, str] = field(default_factory=dict)  # step -> `slurm-bridge status`
    mig_claims: dict[str, str] = field(default_factory=dict)  # claim -> its MIG slice


# ------------------------------------------------------------------------------ the driver
class Demo:
    def __init__(
        self,
        env: DemoEnv,
        out: TextIO = sys.stdout,
        deadline: float = DEFAULT_DEADLINE,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.env = env
        self.out = out
        self.deadline = deadline
        self.monotonic = monotonic
        self.result = DemoResult()
        self.started: list[str] = []
        self.kube_url = ""
        self.t0 = monotonic()
        self.user_kubeconfigs: dict[str, Path] = {}  # minted on this run's API server

    @functools.cached_property
    def chart(self) -> chart_webhooks.ChartWebhooks:
        """The chart's webhooks and ServiceAccount names, as ``helm template`` renders them."""
        try:
            return chart_webhooks.render([NAMESPACE])
        except chart_webhooks.ChartRenderError as e:
            raise DemoFailed(str(e)) from e

    @functools.cached_property
    def identities(self) -> chart_rbac.ChartIdentities:
        """The chart's ServiceAccounts and RBAC, as ``helm template`` renders them."""
        try:
            return chart_rbac.render(leader_election=False)
        except chart_webhooks.ChartRenderError as e:
            raise DemoFailed(str(e)) from e

    # --- running commands ---------------------------------------------------------------
    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def step(self, title: str) -> None:
        self.say(f"\n== {title}   [{self.monotonic() - self.t0:.1f} s]")

    def run(
        self, args: Sequence[str], *, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            list(args),
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env.child_env(),
            timeout=60,
            check=False,
        )
        if check and proc.returncode != 0:
            raise DemoFailed(
                f"`{' '.join(args)}` failed (exit {proc.returncode}): "
                f"{(proc.stderr or proc.stdout).strip()}"
            )
        return proc

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run([self.env.python, "-m", "bridge.cli", *args], check=check)

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        return self.run([self.env.kubectl, *args], stdin=stdin).stdout

    def squeue(self, *args: str) -> str:
        """``squeue`` in the sandbox's chroot: what ``slurm-bridge sandbox slurm exec --
        squeue`` runs, without starting a Python process for every poll."""
        return self.run(["chroot", self.env.slurm["SLURM_CHROOT"], "squeue", *args]).stdout

    def wait(self, what: str, check: Callable[[], Any]) -> Any:
        end = self.monotonic() + self.deadline
        last: Any = None
        while self.monotonic() < end:
            last = check()
            if last:
                return last
            time.sleep(POLL)
        raise DemoFailed(f"timed out after {self.deadline:.0f} s waiting for {what}")

    # --- the Kubernetes side ------------------------------------------------------------
    def pods(self) -> list[dict[str, Any]]:
        doc = json.loads(self.kubectl("get", "pods", "-n", NAMESPACE, "-o", "json"))
        return list(doc.get("items") or [])

    def pod_map(self) -> dict[str, dict[str, Any]]:
        return {p["metadata"]["name"]: p for p in self.pods()}

    @staticmethod
    def scheduled_message(pod: Mapping[str, Any]) -> str:
        for c in (pod.get("status") or {}).get("conditions") or []:
            if c.get("type") == CONDITION_POD_SCHEDULED and c.get("status") == "False":
                return f"{c.get('reason')}: {c.get('message')}"
        return ""

    def wait_bound(self, names: Sequence[str]) -> None:
        def all_bound() -> bool:
            pods = self.pod_map()
            return all((pods.get(n, {}).get("spec") or {}).get("nodeName") for n in names)

        self.wait(f"pods {', '.join(names)} to be bound", all_bound)
        pods = self.pod_map()
        for n in names:
            p = pods[n]
            self.result.bound[n] = p["spec"]["nodeName"]
            label = (p["metadata"].get("labels") or {}).get(LABEL_JOB_ID)
            if label:
                self.result.job_ids[n] = int(label)
            self.result.tolerations[n] = list(p["spec"].get("tolerations") or [])

    def finish(self, names: Sequence[str]) -> None:
        """The kubelet stand-in: the pods' containers exit 0 (phase Succeeded)."""
        for n in names:  # what `slurm-bridge sandbox kube-api finish-pod` sends
            url = f"{self.kube_url}/sandbox/pods/{NAMESPACE}/{n}/finish"
            req = urllib.request.Request(
                url, data=b'{"exitCode": 0}', method="POST", headers=_JSON_HEADERS
            )
            try:
                with urllib.request.urlopen(req, timeout=10):
                    pass
            except OSError as e:
                raise DemoFailed(f"the kubelet stand-in could not finish pod {n}: {e}") from e
        self.say(f"(kubelet stand-in) containers of {', '.join(names)} exited 0")

    def wait_jobs_gone(self, names: Sequence[str]) -> None:
        ids = {str(self.result.job_ids[n]) for n in names if n in self.result.job_ids}

        def gone() -> bool:
            # a hetjob's components are listed as <id>+<offset>
            listed = {
                i.partition("+")[0]
                for i in self.squeue("-h", "-p", self.env.partition, "-o", "%i").split()
            }
            return not (ids & listed)

        self.wait(f"Slurm jobs {', '.join(sorted(ids))} to end", gone)

    def show(self, key: str) -> None:
        """squeue beside kubectl get pods, and why pending pods wait (each command printed
        exactly as run, so it can be pasted)."""
        sq_args = ("-p", self.env.partition, "-o", SQUEUE_FORMAT)
        sq = self.squeue(*sq_args)
        self.result.squeue[key] = sq
        self.say(f"$ slurm-bridge sandbox slurm exec -- squeue {shlex.join(sq_args)}")
        self.say(sq.rstrip())
        self.say(f"$ kubectl get pods -n {NAMESPACE} -o wide")
        wide = self.kubectl("get", "pods", "-n", NAMESPACE, "-o", "wide")
        self.say("\n".join(line.rstrip() for line in wide.rstrip().splitlines()))
        for p in self.pods():
            if (p.get("spec") or {}).get("nodeName"):
                continue
            msg = self.scheduled_message(p)
            if msg:
                self.say(f"  {p['metadata']['name']} waits: {msg}")

    def status(self, key: str) -> None:
        """``slurm-bridge status``: both sides joined, one row per group."""
        args = ("status", "--config", str(self.env.config_file))
        self.say(f"$ slurm-bridge {shlex.join(args)}")
        text = self.cli(*args).stdout.rstrip()
        self.result.status[key] = text
        self.say(text)

    def apply(self, path: Path | None = None, text: str | None = None) -> None:
        if path is not None:
            self.say(f"$ kubectl apply -f {path.relative_to(path.parent.parent.parent)}")
            self.say(self.kubectl("apply", "-f", str(path)).rstrip())
        else:
            self.say(self.kubectl("apply", "-f", "-", stdin=text).rstrip())

    def as_user(self, username: str) -> list[str]:
        """kubectl arguments authenticating as ``username`` (a token minted once per run)."""
        path = self.user_kubeconfigs.get(username)
        if path is None:
            path = self.env.demo_dir / "users" / f"{username.replace(':', '_')}.kubeconfig"
            self.cli("sandbox", "kube-api", "kubeconfig", "--user", username, "-o", str(path))
            self.user_kubeconfigs[username] = path
        return ["--kubeconfig", str(path)]

    def controllers_stand_in(self, kind: str, name: str) -> list[str]:
        """Wait for the pods the JobSet/LWS/Job controllers' stand-in creates (the sandbox
        has no such controllers; ``slurm-bridge sandbox workloads`` watches for them)."""
        plural = {"JobSet": "jobsets", "LeaderWorkerSet": "leaderworkersets", "Job": "jobs"}
        doc = self.kubectl("get", plural[kind], name, "-n", NAMESPACE, "-o", "json")
        names = workload_controller.pods_for(json.loads(doc))

        def created() -> bool:
            self.check_alive()
            return set(names) <= set(self.pod_map())

        self.wait(f"the controller stand-in to create the pods of {kind} {name}", created)
        self.say(f"(controller stand-in) created the pods of {kind} {name}: {', '.join(names)}")
        return names

    # --- setting up ---------------------------------------------------------------------
    def write_files(self, kube_port: int, admission_port: int) -> str:
        """TLS for the webhook, the bridge's config; returns the CA (PEM)."""
        import trustme  # test/demo extra, installed by deploy/setup.sh

        d = self.env.demo_dir
        (d / "tls").mkdir(parents=True, exist_ok=True)
        (d / "logs").mkdir(parents=True, exist_ok=True)
        ca = trustme.CA()
        cert = ca.issue_cert("127.0.0.1", "localhost", self.chart.service_host)
        cert.private_key_pem.write_to_path(str(d / "tls" / "tls.key"))
        cert.cert_chain_pems[0].write_to_path(str(d / "tls" / "tls.crt"))
        ca.cert_pem.write_to_path(str(d / "tls" / "ca.crt"))
        s = self.env.slurm
        config = {
            "slurmRestApi": s["SLURM_REST_URL"],
            "slurmTokenFile": s["SLURM_JWT_FILE"],
            "slurmUserName": s["SLURM_USER"],
            "partition": s["SLURM_PARTITION"],
            "managedNamespaces": [NAMESPACE],
            "kubeconfig": str(self.env.kubeconfig),
            "leaderElection": False,
            "logFormat": "json",
            "metricsPort": 0,
            "healthPort": 0,
            "admission": {
                "port": admission_port,
                "bindAddress": "127.0.0.1",
                "tlsCertFile": str(d / "tls" / "tls.crt"),
                "tlsKeyFile": str(d / "tls" / "tls.key"),
                "bridgeUsernames": self.chart.bridge_usernames,
            },
        }
        self.env.config_file.write_text(yaml.safe_dump(config, sort_keys=False))
        ports = {"kubeApi": kube_port, "admission": admission_port}
        (d / "ports.json").write_text(json.dumps(ports))
        return ca.cert_pem.bytes().decode()

    def install_identities(self) -> None:
        """The chart's ServiceAccounts and RBAC (``helm template``), and the stand-in's
        ClusterRole: every component gets only what its rules grant."""
        ids = self.identities
        docs: list[Any] = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
            for ns in ids.namespaces()
        ]
        docs += [*ids.objects, *workload_controller.rbac(STAND_IN_USER)]
        self.say(self.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs)).rstrip())

    def service_account_kubeconfig(self, component: str) -> Path:
        """A kubeconfig for the chart's ServiceAccount of ``component``, its token from
        the TokenRequest API (``kubectl create token``), as a pod's projected token."""
        ns, sa = self.identities.service_accounts[component]
        token = self.kubectl("create", "token", sa, "-n", ns, "--duration", "24h").strip()
        admin = yaml.safe_load(self.env.kubeconfig.read_text())
        cluster = admin["clusters"][0]["cluster"]
        path = self.env.demo_dir / "users" / f"{component}.kubeconfig"
        doc = kubeconfig_for(cluster, token, self.identities.username(component))
        return chart_rbac.write_kubeconfig(path, doc)

    def component_config(self, name: str) -> Path:
        """Each component talks to the API server as its own ServiceAccount with the
        chart's RBAC (the scheduler's and controller's are the ones
        ``admission.bridgeUsernames`` lets write the bridge's keys; the admission webhook
        reads the nodes new pods name, for the Slurm-node guard)."""
        if name not in COMPONENTS:
            return self.env.config_file
        doc = yaml.safe_load(self.env.config_file.read_text())
        doc["kubeconfig"] = str(self.service_account_kubeconfig(name))
        path = self.env.demo_dir / f"config-{name}.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return path

    def start_component(self, name: str, args: Sequence[str] = ()) -> None:
        d = self.env.demo_dir
        args = args or (name, "--config", str(self.component_config(name)))
        with open(d / "logs" / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(
                [self.env.python, "-m", "bridge.cli", *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env.child_env(),
                start_new_session=True,
            )
        (d / f"{name}.pid").write_text(str(proc.pid))
        self.started.append(name)
        self.say(f"{name}: pid {proc.pid}, log {d / 'logs' / f'{name}.log'}")

    def check_alive(self) -> None:
        for name in self.started:
            pid = _read_pid(self.env.demo_dir / f"{name}.pid")
            if pid is None or not _alive(pid):
                log = self.env.demo_dir / "logs" / f"{name}.log"
                tail = "\n".join(_tail(log, 8))
                raise DemoFailed(f"{name} is not running; last lines of {log}:\n{tail}")

    def wait_tls(self, port: int) -> None:
        def accepting() -> bool:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                return True
            self.check_alive()
            return False

        self.wait(f"the admission webhook to listen on 127.0.0.1:{port}", accepting)

    def register_webhooks(self, port: int, ca_pem: str) -> None:
        """What the chart installs (``helm template``): the webhook Service and
        configurations, with an EndpointSlice to the webhook's port and our CA."""
        text = "\n---\n".join(
            yaml.safe_dump(d, sort_keys=False) for d in self.chart.for_sandbox(port, ca_pem)
        )
        self.say(self.kubectl("apply", "-f", "-", stdin=text).rstrip())

    # --- the whole thing ----------------------------------------------------------------
    def up(self) -> DemoResult:
        self.t0 = self.monotonic()
        self.down(quiet=True)
        env = self.env
        kube_port, admission_port = free_port(), free_port()
        self.step("the bridge's files: webhook certificate, config.yaml")
        ca_pem = self.write_files(kube_port, admission_port)
        self.say(f"demo dir {env.demo_dir}: config.yaml, kubeconfig, tls/, logs/")

        self.step("the sandbox Kubernetes API server (its fake kubelet on)")
        self.cli(
            "sandbox",
            "kube-api",
            "up",
            "--port",
            str(kube_port),
            "--kubeconfig",
            str(env.kubeconfig),
            "--nodes",
            ",".join(env.nodes),
            "--kubelet",
        )
        self.kube_url = f"http://127.0.0.1:{kube_port}"
        self.use_namespace(NAMESPACE)
        self.say(f"serving on {self.kube_url}; nodes match Slurm's external nodes")
        self.say(self.kubectl("get", "nodes").rstrip())

        self.step("the admission webhook, registered with the API server")
        self.say("every component's ServiceAccount and RBAC, as the chart renders them:")
        self.install_identities()
        self.start_component("admission")
        self.wait_tls(admission_port)
        self.register_webhooks(admission_port, ca_pem)
        ns_doc = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        self.apply(text=_j(ns_doc))
        self.step("DRA: the GPU and CPU drivers' DeviceClasses and ResourceSlices (docs/dra.md)")
        mig_nodes = expand_hostlist(env.slurm.get("SLURM_MIG_NODES", ""))
        slices = dra_driver.node_slices(
            [n for n in env.nodes if n not in mig_nodes],
            cpus=int(env.slurm.get("SLURM_NODE_CPUS", "8")),
            gpus=int(env.slurm.get("SLURM_NODE_GPUS", "0")),
        )
        # a MIG node: its CPUs, and its GPUs as NVIDIA's driver publishes MIG (step 8)
        slices += [
            dra_driver.cpu_slice(n, int(env.slurm.get("SLURM_NODE_CPUS", "8"))) for n in mig_nodes
        ]
        slices += [s for n in mig_nodes for s in self.mig_pool(n)]
        items = [*dra_driver.device_classes(), *slices]
        self.apply(text=yaml.safe_dump_all(items))

        self.step("the scheduler, the controller, and the Job/JobSet/LWS controllers' stand-in")
        self.start_component("scheduler")
        self.start_component("controller")
        kubeconfig = self.as_user(STAND_IN_USER)[1]
        self.start_component(STAND_IN, ("sandbox", STAND_IN, "--kubeconfig", kubeconfig))
        self.say(
            "\nTo type the commands below yourself, in another shell:\n"
            + "\n".join(f"  {line}" for line in self.exports())
        )

        ex = env.examples
        self.step("1. the pause pod: one pod, one Slurm placeholder job")
        self.apply(ex / "pause.yaml")
        self.wait_bound(["pause"])
        self.check_alive()
        self.show("pause")

        self.step("2. PodGroup pg-1: 2 pods, minMember 2, 3 CPUs each: ONE Slurm job, 2 nodes")
        self.apply(ex / "podgroup.yaml")
        pg1 = ["pg-1-a", "pg-1-b"]
        self.wait_bound(pg1)
        self.show("pg-1")

        self.step("3. a second group pg-2 (the same, renamed) waits for Slurm's resources")
        self.apply(text=(ex / "podgroup.yaml").read_text().replace("pg-1", "pg-2"))
        pg2 = ["pg-2-a", "pg-2-b"]

        def waits_on_resources() -> bool:
            pods = self.pod_map()
            msgs = {n: self.scheduled_message(pods.get(n, {})) for n in pg2}
            if all("Resources" in m for m in msgs.values()):
                self.result.waiting_messages.update(msgs)
                return True
            return False

        self.wait("pg-2 to wait with Slurm's reason Resources", waits_on_resources)
        self.show("pg-2-pending")
        self.status("pg-2-pending")

        self.step("4. pg-1 finishes: its Slurm job ends, pg-2 gets the nodes")
        self.finish(pg1)
        self.wait_bound(pg2)
        self.show("pg-2-bound")

        self.step("5. a JobSet (1 driver + 2 workers): one gang, one Slurm hetjob")
        self.finish(["pause", *pg2])
        self.wait_jobs_gone(["pause", *pg2])
        self.apply(ex / "jobset.yaml")
        js = self.controllers_stand_in("JobSet", "js-1")
        self.wait_bound(js)
        self.show("jobset")

        self.step("6. a LeaderWorkerSet of size 3: leader on the first node")
        self.finish(js)
        self.wait_jobs_gone(js)
        self.apply(ex / "lws.yaml")
        lws = self.controllers_stand_in("LeaderWorkerSet", "lws-1")
        self.wait_bound(lws)
        self.check_alive()
        self.show("lws")

        self.step("7. the LWS finishes: its Slurm job ends, every node is free again")
        self.finish(lws)
        self.wait_jobs_gone(lws)
        self.show("free")
        if mig_nodes:
            self.mig_slices(mig_nodes[0])
        self.usage()
        return self.result

    def mig_pool(self, node: str) -> list[dict[str, Any]]:
        """The MIG node's GPUs as the DRA driver stand-in publishes them for the Slurm
        sandbox's ``--mig-layout/--mig-gpu/--mig-publish/--mig-naming``."""
        slurm = self.env.slurm
        return dra_driver.mig_pool(
            node,
            MigLayout.parse(slurm.get("SLURM_MIG_LAYOUT") or "1g.10gb*7"),
            nvidia_mig_gpu(slurm.get("SLURM_MIG_GPU") or "A100-80GB"),
            publish=slurm.get("SLURM_MIG_PUBLISH") or dra_driver.PUBLISH_DYNAMIC,
            naming=slurm.get("SLURM_MIG_NAMING") or dra_driver.NAMING_PROFILE_ID_START,
        )

    def mig_slices(self, node: str) -> None:
        """Step 8 (a Slurm sandbox with ``--mig-nodes``): a pod per MIG instance of the
        node's layout, each asking its profile by a ResourceClaimTemplate (class
        ``mig.nvidia.com`` and a CEL selector); Slurm places each on a slice of its type,
        and each claim names the slice the bridge's packer maps Slurm's index to."""
        layout = MigLayout.parse(self.env.slurm.get("SLURM_MIG_LAYOUT") or "1g.10gb*7")
        mig = [d.type for d in layout.devices if not d.whole]
        self.step(
            f"8. MIG slices on {node} ({layout}): a pod per slice, each claim names its slice"
        )
        docs: list[dict[str, Any]] = []
        for profile in dict.fromkeys(mig):
            expr = f'device.attributes["{dra_driver.GPU_DRIVER}"].profile == "{profile}"'
            request = {
                "name": "mig",
                "exactly": {
                    "deviceClassName": dra_driver.MIG_CLASS,
                    "selectors": [{"cel": {"expression": expr}}],
                },
            }
            docs.append(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaimTemplate",
                    "metadata": {"name": f"mig-{profile}", "namespace": NAMESPACE},
                    "spec": {"spec": {"devices": {"requests": [request]}}},
                }
            )
        names: list[str] = []
        for i, profile in enumerate(mig):
            name = f"mig-{profile.replace('.', '-')}-{i}"
            names.append(name)
            docs.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": name,
                        "namespace": NAMESPACE,
                        "annotations": {"slurmjob.slinky.slurm.net/exclusive": "false"},
                    },
                    "spec": {
                        "schedulerName": "slurm-bridge-scheduler",
                        "resourceClaims": [
                            {"name": "mig", "resourceClaimTemplateName": f"mig-{profile}"}
                        ],
                        "containers": [
                            {
                                "name": "main",
                                "image": "registry.k8s.io/pause:3.10",
                                "resources": {
                                    "requests": {"cpu": "100m", "memory": "100Mi"},
                                    "claims": [{"name": "mig"}],
                                },
                            }
                        ],
                    },
                }
            )
        self.apply(text=yaml.safe_dump_all(docs))
        self.wait_bound(names)
        self.show("mig")
        columns = (
            "POD:.metadata.ownerReferences[0].name,CLAIM:.metadata.name,"
            "DEVICE:.status.allocation.devices.results[0].device"
        )
        args = ("get", "resourceclaims", "-n", NAMESPACE, "-o", f"custom-columns={columns}")
        self.say(f"$ kubectl {shlex.join(args)}")
        claims = self.kubectl(*args)
        self.say(claims.rstrip())
        self.result.mig_claims = {
            line.split()[1]: line.split()[2] for line in claims.splitlines()[1:] if line.split()
        }
        self.finish(names)
        self.wait_jobs_gone(names)

    def use_namespace(self, namespace: str) -> None:
        """The kubeconfig's context namespace, so a plain ``kubectl get pods`` shows the demo."""
        doc = yaml.safe_load(self.env.kubeconfig.read_text())
        for ctx in doc.get("contexts") or []:
            ctx["context"]["namespace"] = namespace
        self.env.kubeconfig.write_text(yaml.safe_dump(doc, sort_keys=False))

    def exports(self) -> list[str]:
        env = self.env
        return [
            f"export KUBECONFIG={env.kubeconfig}",
            f"export SLURM_BRIDGE_SANDBOX_DIR={env.slurm['SLURM_SANDBOX_DIR']}",
            f"export SLURM_SANDBOX_KUBE_API_DIR={env.kube_api_dir}",
            f"export PATH={Path(env.python).parent}:$PATH",
        ]

    def usage(self) -> None:
        env = self.env
        lines = [
            "",
            "== the demo keeps running, every Slurm node free; try it yourself:",
            *(f"  {line}" for line in self.exports()),
            f"  kubectl apply -f {env.examples}/indexed-job.yaml",
            f"  kubectl get pods -n {NAMESPACE} -o wide",
            f"  slurm-bridge sandbox slurm exec -- squeue -p {env.partition}",
            f"  kubectl describe pod pg-2-a -n {NAMESPACE}   # events: Slurm's reasons, Scheduled",
            f"  slurm-bridge sandbox kube-api finish-pod {NAMESPACE} indexed-1-0-x0"
            "   # kubelet stand-in: the pod exits 0",
            "  (the controller cancels a Slurm job once every pod of its group has finished)",
            f"  logs:   {env.demo_dir}/logs/, {env.kube_api_dir}/kube-api.log",
            f"  config: {env.config_file}",
            "  stop:   ./deploy/demo.sh down   (then `slurm-bridge sandbox slurm down`"
            " stops Slurm)",
        ]
        self.say("\n".join(lines))

    def down(self, *, quiet: bool = False) -> None:
        """Stop the components, cancel the demo's Slurm jobs, stop the API server."""
        d = self.env.demo_dir
        for name in (STAND_IN, *reversed(COMPONENTS)):
            pid = _read_pid(d / f"{name}.pid")
            if pid is not None and _alive(pid):
                _stop(pid)
                if not quiet:
                    self.say(f"stopped {name} (pid {pid})")
            with contextlib.suppress(OSError):
                (d / f"{name}.pid").unlink()
        job_ids: set[str] = set()
        if self._kube_api_up():
            with contextlib.suppress(DemoFailed, ValueError):
                for p in self.pods():
                    label = (p["metadata"].get("labels") or {}).get(LABEL_JOB_ID)
                    if label:
                        job_ids.add(str(label))
        chroot = ["chroot", self.env.slurm["SLURM_CHROOT"]]
        if job_ids:
            self.run([*chroot, "scancel", *sorted(job_ids)], check=False)
        names = ",".join(DEMO_JOB_NAMES)
        self.run(
            [*chroot, "scancel", f"--partition={self.env.partition}", f"--name={names}"],
            check=False,
        )
        cluster_cli.stop(self.env.kube_api_dir, quiet=True)
        if not quiet:
            self.say("stopped the sandbox API server; cancelled the demo's Slurm jobs")

    def _kube_api_up(self) -> bool:
        st = cluster_cli.read_state(self.env.kube_api_dir)
        if st is None or not self.env.kubeconfig.exists():
            return False
        return _alive(int(str(st["pid"])))


# ------------------------------------------------------------------------------ helpers
def _j(obj: Any) -> str:
    return json.dumps(obj)


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[-1].split()[0] != "Z"
    return True


def _stop(pid: int, grace: float = 10.0) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + grace
    while _alive(pid) and time.monotonic() < end:
        time.sleep(0.05)
    if _alive(pid):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _tail(path: Path, n: int) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-n:]
    except OSError:
        return []


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="slurm-bridge sandbox demo", description=__doc__)
    p.add_argument("cmd", choices=["up", "down", "status"])
    p.add_argument("--dir", help="demo dir (default: <Slurm sandbox dir>/demo)")
    p.add_argument("--deadline", type=float, default=DEFAULT_DEADLINE, help="seconds per step")
    ns = p.parse_args(argv)
    try:
        demo = Demo(DemoEnv.load(os.environ, ns.dir), deadline=ns.deadline)
        if ns.cmd == "up":
            demo.up()
        elif ns.cmd == "down":
            demo.down()
        else:
            ok = demo._kube_api_up()
            print(f"demo {'running' if ok else 'not running'} ({demo.env.demo_dir})")
            return 0 if ok else 3
    except DemoFailed as e:
        print(f"\ndemo failed: {e}", file=sys.stderr)
        return 1
    return 0
