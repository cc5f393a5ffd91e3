"""``slurm-bridge sandbox slurm``: a real Slurm cluster in a Debian chroot, for tests and the demo.

    slurm-bridge sandbox slurm up [--nodes N] [--external-nodes M] [--accounting]
                                  [--topology block:BxN|tree:BxN|none]
                                  [--suite sid|trixie] [--extra-conf LINE]... [--defaults]
    slurm-bridge sandbox slurm down [--purge]
    slurm-bridge sandbox slurm status            (exit 0 when up, 3 when down)
    slurm-bridge sandbox slurm restart-ctld | rest-stop | rest-start
    slurm-bridge sandbox slurm exec -- CMD...    (a Slurm CLI inside the chroot)

This module holds the pure part (settings, the Slurm config files, the env file of the
sandbox contract) and drives ``slurm-sandbox.sh`` (package data), which does the root-level
work: debootstrap, mounts, daemons. Everything lives in the sandbox dir
(``$SLURM_BRIDGE_SANDBOX_DIR``, default ``~/.cache/slurm-bridge/slurm``).

``up`` remembers its settings in ``settings.json``: a later ``up`` (or ``restart-ctld``,
``rest-start``, ``status``) without options keeps them; options and the port variables
change only what they name; ``--defaults`` starts from the defaults again.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import json
import os
import re
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from bridge.devices.mig import nvidia_mig_gpu
from bridge.errors import ConfigError
from sandbox.slurm.mig import MIG_PROFILE, MigLayout

ENV_DIR = "SLURM_BRIDGE_SANDBOX_DIR"
ENV_MIRROR = "SLURM_SANDBOX_MIRROR"
DEFAULT_DIR = Path("~/.cache/slurm-bridge/slurm")
EXIT_DOWN = 3

SLURMD_PREFIX = "batch-node-"
EXTERNAL_PREFIX = "kube-node-"
# --mig-nodes N: State=EXTERNAL nodes mig-node-N in the external partition, each one GPU cut
# into --mig-slices slices of the typed GRES gpu:<--mig-profile> (docs/fractional-gpus.md).
# They are DYNAMIC nodes (scontrol create after slurmctld starts, with the feature "mig"
# that the partition's NodeSet picks up): a node of slurm.conf with the same gres.conf line
# reports only counts (gpu:1g.10gb(CNT:1)), gives a job asking a typed GRES per task NO
# slice (JOB_GRES=gpu:1g.10gb:0) and afterwards refuses GRES jobs ("Requested nodes are
# busy") until slurmctld restarts (26.05.5); a created one reports indices and frees them.
MIG_PREFIX = "mig-node-"
# what the DRA driver stand-in may publish (sandbox/controllers/dra_driver.py; kept here
# as plain words: the launcher does not import the controllers)
MIG_PUBLISHES = ("dynamic", "static")
MIG_NAMINGS = ("profile-id-start", "id-start-size", "profile-start-end")
# --mig-full-gpus N: each MIG node also has N whole GPUs (typed gpu:a100, before its
# slices): a mixed node, one full GPU and the slices of another
MIG_FULL_TYPE = "a100"
MIG_FEATURE = "mig"
MIG_NODESET = "mignodes"
PARTITION = "slurm-bridge"
BATCH_PARTITION = "batch"
TOKEN_USER = "slurm"
TOKEN_LIFESPAN_SECONDS = 30 * 24 * 3600
SUITES = ("sid", "trixie")
BASE_PACKAGES: tuple[str, ...] = ("munge", "slurmctld", "slurmd", "slurmrestd", "slurm-client")
BASE_PACKAGES += ("slurm-wlm-jwt-plugin", "procps")
ACCOUNTING_PACKAGES = ("slurmdbd", "mariadb-server")
# Queued external placeholder jobs start only at a scheduling pass: batch_sched_delay=0
# lets a submit trigger one at slurmctld's next 1 s tick (default: up to 3 s later),
# sched_interval/bf_interval keep the periodic passes short. (Jobs the bridge starts at
# once with job/allocate need none of this.) See docs/slurm-configuration.md.
SCHEDULER_PARAMETERS = "batch_sched_delay=0,default_queue_depth=1000,sched_interval=2,bf_interval=1"
# env var -> Settings field, for the ports (a second cluster can run beside the first)
PORT_ENV = {
    "SLURM_SANDBOX_REST_PORT": "rest_port",
    "SLURM_SANDBOX_CTLD_PORT": "ctld_port",
    "SLURM_SANDBOX_SLURMD_PORT": "slurmd_port",
    "SLURM_SANDBOX_DBD_PORT": "dbd_port",
    "SLURM_SANDBOX_MYSQL_PORT": "mysql_port",
}
REST_READY_SECONDS = 30.0
# The tests' own sandbox (deploy/test.sh, pytest): another dir and other ports than the
# default one the demo and a user's `slurm-bridge sandbox slurm up` use, so the tests never
# share a cluster (its nodes, its jobs, its daemons) with whatever else runs on the machine.
TEST_DIR = Path("~/.cache/slurm-bridge/test-slurm")
TEST_PORTS = {
    "SLURM_SANDBOX_REST_PORT": 16820,
    "SLURM_SANDBOX_CTLD_PORT": 16817,
    "SLURM_SANDBOX_SLURMD_PORT": 16700,
    "SLURM_SANDBOX_DBD_PORT": 16819,
    "SLURM_SANDBOX_MYSQL_PORT": 16306,
}
ENV_FILE = "SLURM_SANDBOX_ENV"
# --topology KIND:BxN: the external nodes in B blocks (topology/block) or B leaf switches
# under one root (topology/tree) of N nodes each, in topology.yaml as the topology of the
# external nodes' partition (the batch nodes keep a flat one, the cluster default).
TOPOLOGY_KINDS = ("block", "tree")
TOPOLOGY_NAME = "net"
MAX_SWITCH_WAIT_SECONDS = 86400
TOPOLOGY_UNIT = {"block": "block-", "tree": "leaf-"}


@dataclass(frozen=True)
class Topology:
    """``block:2x4``: the external nodes as 2 blocks of 4 (in node-name order)."""

    kind: str
    units: int
    size: int

    @classmethod
    def parse(cls, text: str) -> Topology:
        m = re.fullmatch(r"(\w+):(\d+)x(\d+)", text)
        if m is None or m[1] not in TOPOLOGY_KINDS or int(m[2]) < 1 or int(m[3]) < 1:
            raise ConfigError(
                "topology", f"must be none or KIND:BxN with KIND block or tree, not {text!r}"
            )
        return cls(m[1], int(m[2]), int(m[3]))

    @property
    def nodes(self) -> int:
        return self.units * self.size

    def unit_of(self, index: int) -> str:
        """The block / leaf switch of external node ``index``."""
        return f"{TOPOLOGY_UNIT[self.kind]}{index // self.size}"


@dataclass(frozen=True)
class Settings:
    """What ``up`` builds. Saved as settings.json; every field has a CLI option or env var."""

    suite: str = "sid"
    nodes: int = 2
    external_nodes: int = 3
    accounting: bool = False
    extra_conf: tuple[str, ...] = ()
    topology: str = "none"
    node_cpus: int = 8
    node_mem_mb: int = 16000
    node_gpus: int = 2
    mig_nodes: int = 0
    mig_profile: str = "1g.10gb"
    mig_slices: int = 7
    mig_full_gpus: int = 0
    # --mig-layout: each MIG node's GPUs (sandbox/slurm/mig.py), e.g. a whole GPU and a
    # sliced one "h100,3g.40gb+2g.20gb+1g.10gb*2", checked against --mig-gpu's counters;
    # "" is one GPU of --mig-slices --mig-profile slices
    mig_layout: str = ""
    mig_gpu: str = "A100-80GB"
    # how the DRA driver stand-in publishes the MIG nodes' GPUs (sandbox/controllers/
    # dra_driver.py mig_pool): "dynamic" (every placement, with counters) or "static"
    # (the layout's instances only), and NVIDIA's naming scheme
    mig_publish: str = "dynamic"
    mig_naming: str = "profile-id-start"
    rest_port: int = 6820
    ctld_port: int = 6817
    slurmd_port: int = 17000
    dbd_port: int = 6819
    mysql_port: int = 13306

    def __post_init__(self) -> None:
        if self.suite not in SUITES:
            raise ConfigError("suite", f"must be one of {', '.join(SUITES)}, not {self.suite!r}")
        for name in ("nodes", "external_nodes", "node_gpus", "mig_nodes"):
            if getattr(self, name) < 0:
                raise ConfigError(name, "must be >= 0")
        if not 1 <= self.mig_slices <= 7:
            raise ConfigError("mig_slices", "must be 1..7 (a GPU has at most 7 MIG slices)")
        if not MIG_PROFILE.fullmatch(self.mig_profile):
            raise ConfigError("mig_profile", f"{self.mig_profile!r} is not a MIG profile (1g.10gb)")
        if not 0 <= self.mig_full_gpus <= 8:
            raise ConfigError("mig_full_gpus", "must be 0..8")
        if self.mig_layout:
            if self.mig_full_gpus:
                raise ConfigError(
                    "mig_full_gpus",
                    f"the whole GPUs are part of --mig-layout ({MIG_FULL_TYPE},...)",
                )
            MigLayout.parse(self.mig_layout).check(nvidia_mig_gpu(self.mig_gpu))
        if self.mig_publish not in MIG_PUBLISHES:
            raise ConfigError("mig_publish", f"must be one of {', '.join(MIG_PUBLISHES)}")
        if self.mig_naming not in MIG_NAMINGS:
            raise ConfigError("mig_naming", f"must be one of {', '.join(MIG_NAMINGS)}")
        for name in ("node_cpus", "node_mem_mb"):
            if getattr(self, name) < 1:
                raise ConfigError(name, "must be >= 1")
        if self.nodes + self.external_nodes + self.mig_nodes < 1:
            raise ConfigError("nodes", "the cluster needs at least one node")
        for name in PORT_ENV.values():
            port = getattr(self, name)
            if not 1 <= port <= 65535:
                raise ConfigError(name, f"{port} is not a TCP port")
        if self.slurmd_port + self.nodes - 1 > 65535:
            raise ConfigError("slurmd_port", "the slurmd port range passes 65535")
        topo = self.network
        if topo is not None and topo.nodes != self.external_nodes:
            raise ConfigError(
                "topology",
                f"{self.topology} places {topo.nodes} external nodes, "
                f"but there are {self.external_nodes} (--external-nodes {topo.nodes})",
            )
        for line in self.extra_conf:
            if "\n" in line or not line.strip():
                raise ConfigError("extra_conf", f"must be one non-empty line, not {line!r}")

    @property
    def network(self) -> Topology | None:
        """The parsed ``topology`` setting; None for ``none``."""
        return None if self.topology == "none" else Topology.parse(self.topology)

    @property
    def mig(self) -> MigLayout:
        """The GPUs of each MIG node."""
        if self.mig_layout:
            return MigLayout.parse(self.mig_layout)
        whole = MigLayout(((MIG_FULL_TYPE,),) * self.mig_full_gpus)
        return whole + MigLayout.uniform(self.mig_profile, self.mig_slices)

    @property
    def tag(self) -> str:
        return f"{self.suite}-acct" if self.accounting else self.suite

    @property
    def slurmd_nodes(self) -> list[str]:
        return [f"{SLURMD_PREFIX}{i}" for i in range(self.nodes)]

    @property
    def partition(self) -> str:
        """The partition placeholder jobs go to: the external nodes', else the batch one."""
        return PARTITION if self.external_nodes or self.mig_nodes else BATCH_PARTITION

    @property
    def packages(self) -> tuple[str, ...]:
        return BASE_PACKAGES + (ACCOUNTING_PACKAGES if self.accounting else ())

    @property
    def openapi_plugins(self) -> str:
        return "openapi/slurmctld,openapi/slurmdbd" if self.accounting else "openapi/slurmctld"

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["extra_conf"] = list(self.extra_conf)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Settings:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(sorted(unknown)[0], "unknown sandbox setting")
        values = dict(data)
        if "extra_conf" in values:
            values["extra_conf"] = tuple(values["extra_conf"])
        return cls(**values)


@dataclass(frozen=True)
class Paths:
    """Where everything of one sandbox lives."""

    dir: Path

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Paths:
        raw = environ.get(ENV_DIR) or str(DEFAULT_DIR)
        return cls(Path(raw).expanduser().absolute())

    def root(self, settings: Settings) -> Path:
        return self.dir / f"{settings.tag}-root"

    def cache(self, settings: Settings) -> Path:
        return self.dir / "cache" / f"{settings.tag}-root.tar.zst"

    @property
    def env_file(self) -> Path:
        return self.dir / "cluster.env"

    @property
    def jwt_file(self) -> Path:
        return self.dir / "jwt"

    @property
    def settings_file(self) -> Path:
        return self.dir / "settings.json"

    @property
    def conf_dir(self) -> Path:
        return self.dir / "conf"


# ---------------------------------------------------------------------------- pure rendering


def hostlist(prefix: str, count: int) -> str:
    """Slurm hostlist of ``prefix0..prefix<count-1>``: ``kube-node-[0-2]``, ``kube-node-0``."""
    if count < 1:
        raise ValueError("hostlist needs at least one host")
    return f"{prefix}0" if count == 1 else f"{prefix}[0-{count - 1}]"


def external_hostlist(s: Settings) -> str:
    """Every State=EXTERNAL node: ``kube-node-[0-2],mig-node-0`` ("" when none)."""
    parts = [hostlist(EXTERNAL_PREFIX, s.external_nodes)] if s.external_nodes else []
    parts += [hostlist(MIG_PREFIX, s.mig_nodes)] if s.mig_nodes else []
    return ",".join(parts)


def _switch_wait(s: Settings) -> str:
    """A tree topology's cap on a job's switch wait (``--switches=N@time``; default 300 s):
    a day, so a job that requires one leaf switch waits for one rather than straddle."""
    topo = s.network
    return f",max_switch_wait={MAX_SWITCH_WAIT_SECONDS}" if topo and topo.kind == "tree" else ""


def render_slurm_conf(s: Settings) -> str:
    lines = [
        "# written by slurm-bridge sandbox slurm up; do not edit (the next up rewrites it)",
        "ClusterName=sandbox",
        "SlurmctldHost=localhost",
        f"SlurmctldPort={s.ctld_port}",
        f"SlurmdPort={s.slurmd_port}",
        "SlurmUser=slurm",
        "AuthType=auth/munge",
        "AuthAltTypes=auth/jwt",
        "AuthAltParameters=jwt_key=/etc/slurm/jwt_hs256.key",
        "StateSaveLocation=/var/spool/slurmctld",
        "SlurmdSpoolDir=/var/spool/slurmd/%n",
        "SlurmctldPidFile=/run/slurmctld.pid",
        "SlurmdPidFile=/run/slurmd-%n.pid",
        "SlurmctldLogFile=/var/log/slurm/slurmctld.log",
        "SlurmdLogFile=/var/log/slurm/slurmd-%n.log",
        "MailProg=/bin/true",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        # fake CPUs/memory beyond the machine's are accepted
        "SlurmdParameters=config_overrides",
        # an admin DOWN stays down; a node whose slurmd comes back returns
        "ReturnToService=1",
        "SlurmdTimeout=30",
        "MpiDefault=none",
        "SwitchType=switch/none",
        "SchedulerType=sched/backfill",
        f"SchedulerParameters={SCHEDULER_PARAMETERS}{_switch_wait(s)}",
        "GresTypes=gpu",
        # room for nodes created at run time (scontrol create / POST /new/node)
        f"MaxNodeCount={s.nodes + s.external_nodes + s.mig_nodes + 256}",
        # a busy site's job table (the scale benchmark holds 50,000+ jobs; default 10,000)
        "MaxJobCount=200000",
        # preemption by partition PriorityTier: every partition here has tier 1, so nothing
        # is preempted until a higher-tier partition shares nodes (the preemption tests
        # create one at run time, and a GraceTime; docs/controller.md)
        "PreemptType=preempt/partition_prio",
        "PreemptMode=CANCEL",
    ]
    if s.accounting:
        lines += [
            "AccountingStorageType=accounting_storage/slurmdbd",
            "AccountingStorageTRES=gres/gpu",
            "AccountingStorageHost=localhost",
            f"AccountingStoragePort={s.dbd_port}",
            "AccountingStorageEnforce=associations,limits,qos",
            "PriorityType=priority/multifactor",
            "PriorityWeightFairshare=10000",
        ]
    else:
        # (AccountingStorageTRES=gres/gpu without slurmdbd is fatal to slurmctld)
        lines.append("AccountingStorageType=accounting_storage/none")
    gres = f" Gres=gpu:{s.node_gpus}" if s.node_gpus else ""
    res = f"CPUs={s.node_cpus} RealMemory={s.node_mem_mb}{gres}"
    if s.nodes:
        batch = hostlist(SLURMD_PREFIX, s.nodes)
        ports = (
            str(s.slurmd_port)
            if s.nodes == 1
            else f"[{s.slurmd_port}-{s.slurmd_port + s.nodes - 1}]"
        )
        lines.append(
            f"NodeName={batch} NodeHostname=localhost NodeAddr=127.0.0.1 Port={ports} {res}"
            " State=UNKNOWN"
        )
        default = "" if s.external_nodes else " Default=YES"
        lines.append(
            f"PartitionName={BATCH_PARTITION} Nodes={batch}{default} MaxTime=INFINITE State=UP"
        )
    if s.external_nodes:
        ext = hostlist(EXTERNAL_PREFIX, s.external_nodes)
        lines.append(f"NodeName={ext} {res} State=EXTERNAL")
    if s.mig_nodes:
        # the MIG nodes are created at run time (mig_node_conf): the NodeSet picks them up
        lines.append(f"NodeSet={MIG_NODESET} Feature={MIG_FEATURE}")
    if s.external_nodes or s.mig_nodes:
        topo = f" Topology={TOPOLOGY_NAME}" if s.network is not None else ""
        members = [hostlist(EXTERNAL_PREFIX, s.external_nodes)] if s.external_nodes else []
        members += [MIG_NODESET] if s.mig_nodes else []
        lines.append(
            f"PartitionName={PARTITION} Nodes={','.join(members)} Default=YES "
            f"MaxTime=INFINITE State=UP{topo}"
        )
    lines += list(s.extra_conf)
    return "\n".join(lines) + "\n"


def mig_node_conf(s: Settings) -> str:
    """The ``scontrol create`` arguments of every MIG node after its name ("" for none)."""
    if not s.mig_nodes:
        return ""
    return (
        "NodeAddr=127.0.0.1 NodeHostname=localhost State=EXTERNAL "
        f"CPUs={s.node_cpus} RealMemory={s.node_mem_mb} "
        f"Gres={s.mig.gres} Features={MIG_FEATURE}"
    )


def render_gres_conf(s: Settings) -> str:
    lines = ["AutoDetect=off"]
    if s.node_gpus and s.nodes:
        # File= must name character devices (the script makes them: c 1 3, like /dev/null)
        files = "gpu0" if s.node_gpus == 1 else f"gpu[0-{s.node_gpus - 1}]"
        lines.append(
            f"NodeName={hostlist(SLURMD_PREFIX, s.nodes)} Name=gpu File=/var/lib/fakegpu/{files}"
        )
    if s.node_gpus and s.external_nodes:
        lines.append(
            f"NodeName={hostlist(EXTERNAL_PREFIX, s.external_nodes)} Name=gpu Count={s.node_gpus}"
        )
    if s.mig_nodes:
        # A typed GPU needs File= even on an external node (no slurmd: never opened); with
        # Count= only, slurmctld drops it ("Ignoring file-less GPU gpu:1g.10gb from final
        # GRES list") and refuses Gres=gpu:1g.10gb:N on the node. With File=, jobs read
        # back indices: gres_detail gpu:1g.10gb:1(IDX:3). docs/slurm-configuration.md.
        # one line per run of devices of one type, in index order (Slurm's IDX)
        for kind, first, last in s.mig.gres_conf_runs():
            files = f"mig{first}" if first == last else f"mig[{first}-{last}]"
            lines.append(
                f"NodeName={hostlist(MIG_PREFIX, s.mig_nodes)} Name=gpu Type={kind} "
                f"File=/var/lib/fakegpu/{files}"
            )
    return "\n".join(lines) + "\n"


def render_topology_yaml(s: Settings) -> str | None:
    """topology.yaml for ``--topology`` (None without one): a flat cluster default for the
    batch nodes, and ``net`` (block or tree) over the external nodes, in node-name order."""
    topo = s.network
    if topo is None:
        return None
    units = [
        (
            topo.unit_of(i * topo.size),
            f"{EXTERNAL_PREFIX}[{i * topo.size}-{(i + 1) * topo.size - 1}]",
        )
        for i in range(topo.units)
    ]
    lines = [
        "# written by slurm-bridge sandbox slurm up --topology; do not edit",
        "---",
        "- topology: flat",
        "  cluster_default: true",
        "  flat: true",
        f"- topology: {TOPOLOGY_NAME}",
        "  cluster_default: false",
        f"  {topo.kind}:",
    ]
    if topo.kind == "block":
        lines += ["    block_sizes:", f"      - {topo.size}", "    blocks:"]
        for name, nodes in units:
            lines += [f"      - block: {name}", f"        nodes: {nodes}"]
    else:
        lines += [
            "    switches:",
            "      - switch: spine",
            f"        children: leaf-[0-{topo.units - 1}]",
        ]
        for name, nodes in units:
            lines += [f"      - switch: {name}", f"        nodes: {nodes}"]
    return "\n".join(lines) + "\n"


def render_slurmdbd_conf(s: Settings) -> str:
    return (
        "AuthType=auth/munge\n"
        "AuthAltTypes=auth/jwt\n"
        "AuthAltParameters=jwt_key=/etc/slurm/jwt_hs256.key\n"
        "DbdHost=localhost\n"
        f"DbdPort={s.dbd_port}\n"
        "SlurmUser=slurm\n"
        "LogFile=/var/log/slurm/slurmdbd.log\n"
        "PidFile=/run/slurmdbd.pid\n"
        "StorageType=accounting_storage/mysql\n"
        # localhost = MariaDB's unix socket (the TCP port is mysql_port, for other clients)
        "StorageHost=localhost\n"
        "StorageLoc=slurm_acct_db\n"
        "StorageUser=slurm\n"
        "StoragePass=slurmdbpass\n"
    )


def render_conf_files(s: Settings) -> dict[str, str]:
    """File name -> content of everything ``up`` installs in the chroot's /etc/slurm."""
    files = {
        "slurm.conf": render_slurm_conf(s),
        "gres.conf": render_gres_conf(s),
        "cgroup.conf": "CgroupPlugin=disabled\n",
        # not read by Slurm: a change of these restarts slurmrestd like a slurm.conf change
        "slurmrestd.args": f"-s {s.openapi_plugins} 127.0.0.1:{s.rest_port}\n",
    }
    if s.accounting:
        files["slurmdbd.conf"] = render_slurmdbd_conf(s)
    topology = render_topology_yaml(s)
    if topology is not None:
        files["topology.yaml"] = topology
    return files


def newest_api_version(versions: Sequence[str]) -> str:
    """``v0.0.45`` from ``["v0.0.42", "v0.0.45", "v0.0.43"]``."""

    def key(v: str) -> tuple[int, ...]:
        return tuple(int(p) for p in v.lstrip("v").split("."))

    valid = [v for v in versions if re.fullmatch(r"v\d+(\.\d+)*", v)]
    if not valid:
        raise ConfigError("SLURM_API_VERSION", f"no OpenAPI version found in {list(versions)!r}")
    return max(valid, key=key)


def render_env_file(s: Settings, paths: Paths, api_version: str, slurm_version: str) -> str:
    """The env file of the sandbox contract (no secret in it: the token is in the jwt file)."""
    values = {
        "SLURM_REST_URL": f"http://127.0.0.1:{s.rest_port}",
        "SLURM_API_VERSION": api_version,
        "SLURM_USER": TOKEN_USER,
        "SLURM_JWT_FILE": str(paths.jwt_file),
        "SLURM_CHROOT": str(paths.root(s)),
        "SLURM_PARTITION": s.partition,
        "SLURM_EXTERNAL_NODES": external_hostlist(s),
        "SLURM_BATCH_PARTITION": BATCH_PARTITION if s.nodes else "",
        "SLURM_SLURMD_NODES": hostlist(SLURMD_PREFIX, s.nodes) if s.nodes else "",
        "SLURM_NODE_CPUS": str(s.node_cpus),
        "SLURM_NODE_MEM_MB": str(s.node_mem_mb),
        "SLURM_NODE_GPUS": str(s.node_gpus),
        "SLURM_MIG_NODES": hostlist(MIG_PREFIX, s.mig_nodes) if s.mig_nodes else "",
        "SLURM_MIG_GRES": s.mig.gres if s.mig_nodes else "",
        "SLURM_MIG_LAYOUT": str(s.mig) if s.mig_nodes else "",
        "SLURM_MIG_GPU": s.mig_gpu if s.mig_nodes else "",
        "SLURM_MIG_PUBLISH": s.mig_publish if s.mig_nodes else "",
        "SLURM_MIG_NAMING": s.mig_naming if s.mig_nodes else "",
        "SLURM_VERSION": slurm_version,
        "SLURM_SANDBOX_DIR": str(paths.dir),
        "SLURM_TOPOLOGY": s.topology,
        "SLURM_ACCOUNTING": "1" if s.accounting else "0",
    }
    return "".join(f"{k}={v}\n" for k, v in values.items())


def parse_env_file(text: str) -> dict[str, str]:
    """KEY=VALUE lines (blank lines and ``#`` comments skipped; no quoting)."""
    out: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.isidentifier():
            raise ConfigError(f"line {n}", f"not KEY=VALUE: {raw!r}")
        out[key] = value
    return out


def parse_facts(stdout: str) -> tuple[str, list[str]]:
    """(slurm version, API versions) from the script's ``KEY=VALUE`` lines on stdout."""
    facts = parse_env_file(stdout)
    try:
        return facts["SLURM_VERSION"], facts["SLURM_API_VERSIONS"].split()
    except KeyError as e:
        raise ConfigError(str(e.args[0]), "missing from the sandbox script's output") from None


# ---------------------------------------------------------------------------- settings


def env_for_tests(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables that point a test run at the tests' own sandbox: every one the caller
    has not set already (an explicit sandbox dir, env file or port always wins). A caller
    that chose its sandbox dir keeps that sandbox's saved ports too."""
    out: dict[str, str] = {}
    if not environ.get(ENV_DIR):
        out[ENV_DIR] = str(TEST_DIR.expanduser().absolute())
        out.update({k: str(v) for k, v in TEST_PORTS.items() if not environ.get(k)})
    if not environ.get(ENV_FILE):
        out[ENV_FILE] = str(Path(environ.get(ENV_DIR) or out[ENV_DIR]) / "cluster.env")
    return out


def env_file_for_tests(environ: Mapping[str, str]) -> Path:
    """The env file of the sandbox tests use (see :func:`env_for_tests`)."""
    return Path(environ.get(ENV_FILE) or env_for_tests(environ)[ENV_FILE]).expanduser()


def _port_overrides(environ: Mapping[str, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for var, field in PORT_ENV.items():
        raw = environ.get(var)
        if raw is None or raw == "":
            continue
        if not raw.isdigit():
            raise ConfigError(var, f"not a port number: {raw!r}")
        out[field] = int(raw)
    return out


def resolve_settings(
    saved: Settings | None, environ: Mapping[str, str], options: Mapping[str, Any]
) -> Settings:
    """Defaults, then the saved settings, then the port env vars, then the CLI options.

    ``options`` holds only what the user gave (None values are ignored).
    """
    base = saved if saved is not None else Settings()
    changes: dict[str, Any] = dict(_port_overrides(environ))
    changes.update({k: v for k, v in options.items() if v is not None})
    if "extra_conf" in changes:
        changes["extra_conf"] = tuple(changes["extra_conf"])
    return dataclasses.replace(base, **changes)


def load_saved(paths: Paths) -> Settings | None:
    try:
        text = paths.settings_file.read_text()
    except FileNotFoundError:
        return None
    try:
        return Settings.from_json(json.loads(text))
    except (ValueError, TypeError) as e:
        raise ConfigError(str(paths.settings_file), f"unreadable: {e}") from None


def write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    """Write via a temp file + rename, so readers never see half a file; ``mode`` from the start."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# ---------------------------------------------------------------------------- running


def _mirror(environ: Mapping[str, str]) -> str:
    if environ.get(ENV_MIRROR):
        return environ[ENV_MIRROR]
    try:
        for line in Path("/etc/apt/sources.list.d/debian.sources").read_text().splitlines():
            if line.startswith("URIs:"):
                return line.split()[1]
    except (OSError, IndexError):
        pass
    return "http://deb.debian.org/debian"


def script_env(
    s: Settings, paths: Paths, environ: Mapping[str, str], *, no_cache: bool = False
) -> dict[str, str]:
    """The environment the shell script reads (its header documents each variable)."""
    env = dict(environ)
    env.update(
        SBX_DIR=str(paths.dir),
        SBX_ROOT=str(paths.root(s)),
        SBX_SUITE=s.suite,
        SBX_MIRROR=_mirror(environ),
        SBX_PACKAGES=",".join(s.packages),
        SBX_CACHE=str(paths.cache(s)),
        SBX_NO_CACHE="1" if no_cache else "0",
        SBX_CONF_DIR=str(paths.conf_dir),
        SBX_SLURMD_NODES=" ".join(s.slurmd_nodes),
        SBX_EXTERNAL_NODES=str(s.external_nodes),
        SBX_EXTERNAL_NAMES=" ".join(f"{EXTERNAL_PREFIX}{i}" for i in range(s.external_nodes)),
        SBX_GPUS=str(s.node_gpus),
        SBX_MIG_NODES=" ".join(f"{MIG_PREFIX}{i}" for i in range(s.mig_nodes)),
        SBX_MIG_NODE_CONF=mig_node_conf(s),
        SBX_ACCOUNTING="1" if s.accounting else "0",
        SBX_MYSQL_PORT=str(s.mysql_port),
        SBX_REST_PORT=str(s.rest_port),
        SBX_OPENAPI=s.openapi_plugins,
        SBX_TOKEN_USER=TOKEN_USER,
        SBX_TOKEN_LIFESPAN=str(TOKEN_LIFESPAN_SECONDS),
        SBX_JWT_FILE=str(paths.jwt_file),
        SBX_LOCK_HELD="1",
    )
    return env


def _run_script(
    args: Sequence[str], env: Mapping[str, str], *, capture: bool = False
) -> subprocess.CompletedProcess[str]:
    with resources.as_file(resources.files("sandbox.slurm") / "slurm-sandbox.sh") as script:
        return subprocess.run(
            ["bash", str(script), *args],
            env=dict(env),
            stdout=subprocess.PIPE if capture else None,
            text=True,
            check=False,
        )


@contextlib.contextmanager
def _locked(paths: Paths, limit: float = 600.0) -> Iterator[None]:
    """One changing command at a time per sandbox dir (helpers share one sandbox).

    The script takes the same lock itself unless told (SBX_LOCK_HELD) that we hold it.
    """
    paths.dir.mkdir(parents=True, exist_ok=True)
    with open(paths.dir / ".lock", "w") as f:
        deadline = time.monotonic() + limit
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ConfigError(
                        str(paths.dir), "another sandbox command holds the lock"
                    ) from None
                time.sleep(0.2)
        yield


def _rest_ready(url: str, api: str, token_file: Path) -> bool:
    """True once slurmrestd answers an authenticated call (``/ping`` is no auth check).
    One job id, never every job's state: a table of 76,000 jobs took slurmrestd 12 s, so
    each 2 s probe timed out and the retries piled up on it."""
    token = token_file.read_text().strip()
    req = urllib.request.Request(
        f"{url}/slurm/{api}/jobs/state/?job_id=1",
        headers={"X-SLURM-USER-NAME": TOKEN_USER, "X-SLURM-USER-TOKEN": token},
    )
    try:
        with urllib.request.urlopen(req, timeout=2) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _wait_rest(url: str, api: str, token_file: Path, limit: float) -> bool:
    deadline = time.monotonic() + limit
    while True:
        if _rest_ready(url, api, token_file):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def _err(msg: str) -> None:
    print(f"slurm-bridge sandbox slurm: {msg}", file=sys.stderr)


def cmd_up(paths: Paths, s: Settings, environ: Mapping[str, str], no_cache: bool) -> int:
    started = time.monotonic()
    write_atomic(paths.settings_file, json.dumps(s.to_json(), indent=2) + "\n")
    for name, text in render_conf_files(s).items():
        write_atomic(paths.conf_dir / name, text)
    for stale in paths.conf_dir.iterdir():
        if stale.name not in render_conf_files(s):
            stale.unlink()
    proc = _run_script(["up"], script_env(s, paths, environ, no_cache=no_cache), capture=True)
    if proc.returncode != 0:
        _err(f"up failed (exit {proc.returncode}); logs: {paths.dir}/logs, {paths.root(s)}/var/log")
        return proc.returncode
    slurm_version, apis = parse_facts(proc.stdout)
    api = newest_api_version(apis)
    url = f"http://127.0.0.1:{s.rest_port}"
    if not _wait_rest(url, api, paths.jwt_file, REST_READY_SECONDS):
        _err(f"slurmrestd did not answer on {url} within {REST_READY_SECONDS:.0f} s")
        return 1
    env_text = render_env_file(s, paths, api, slurm_version)
    write_atomic(paths.env_file, env_text)
    print(env_text, end="")
    print(
        f"# Slurm {slurm_version} ready in {time.monotonic() - started:.1f} s; env file "
        f"{paths.env_file}; token in {paths.jwt_file} (0600)",
    )
    return 0


def _current(paths: Paths, environ: Mapping[str, str]) -> Settings:
    return resolve_settings(load_saved(paths), environ, {})


def cmd_status(paths: Paths, s: Settings, environ: Mapping[str, str]) -> int:
    proc = _run_script(["status"], script_env(s, paths, environ))
    if proc.returncode not in (0, EXIT_DOWN):
        return proc.returncode
    up = proc.returncode == 0
    if up and paths.env_file.exists():
        env = parse_env_file(paths.env_file.read_text())
        up = _rest_ready(env["SLURM_REST_URL"], env["SLURM_API_VERSION"], paths.jwt_file)
        print(f"{'REST':<22} {'answering' if up else 'NOT answering'} at {env['SLURM_REST_URL']}")
    if paths.env_file.exists():
        print(f"# {paths.env_file}")
        print(paths.env_file.read_text(), end="")
    print("up" if up else "down")
    return 0 if up else EXIT_DOWN


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="slurm-bridge sandbox slurm",
        description="A real Slurm cluster in a Debian chroot on this machine (root).",
    )
    sub = p.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="build/start the cluster (idempotent); print the env file")
    up.add_argument("--nodes", type=int, help="slurmd-backed nodes batch-node-N (default 2)")
    up.add_argument(
        "--external-nodes", type=int, help="State=EXTERNAL nodes kube-node-N (default 3)"
    )
    up.add_argument(
        "--accounting",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also run MariaDB + slurmdbd (accounts, QOS, fairshare)",
    )
    up.add_argument(
        "--topology",
        metavar="KIND:BxN",
        help="the external nodes as B blocks (block) or leaf switches (tree) of N nodes, "
        "in topology.yaml (e.g. block:2x4 with --external-nodes 8); none (default) for no file",
    )
    up.add_argument("--suite", choices=SUITES, help="Debian suite of the chroot (default sid)")
    up.add_argument(
        "--extra-conf",
        action="append",
        metavar="LINE",
        help="a line appended to slurm.conf (repeatable; replaces earlier ones)",
    )
    up.add_argument("--node-cpus", type=int, help="CPUs per node (default 8)")
    up.add_argument("--node-mem-mb", type=int, help="RealMemory per node in MB (default 16000)")
    up.add_argument("--node-gpus", type=int, help="fake GPUs per node (default 2)")
    up.add_argument(
        "--mig-nodes",
        type=int,
        help="State=EXTERNAL nodes mig-node-N, each a GPU cut into MIG slices (default 0)",
    )
    up.add_argument("--mig-profile", help="their slices' MIG profile (default 1g.10gb)")
    up.add_argument("--mig-slices", type=int, help="slices per node, 1..7 (default 7)")
    up.add_argument(
        "--mig-full-gpus",
        type=int,
        help=f"whole GPUs (gpu:{MIG_FULL_TYPE}) per MIG node before its slices (default 0)",
    )
    up.add_argument(
        "--mig-layout",
        help="each MIG node's GPUs instead: a whole GPU's type or MIG profiles joined by +, "
        "*N repeating one, GPUs separated by , (e.g. h100,3g.40gb+2g.20gb+1g.10gb*2)",
    )
    up.add_argument(
        "--mig-gpu", help="the GPU model whose counters the layout must fit (default A100-80GB)"
    )
    up.add_argument(
        "--mig-publish",
        choices=MIG_PUBLISHES,
        help="how the DRA driver stand-in publishes the MIG GPUs: dynamic (every placement, "
        "with counters; default) or static (the layout's instances only)",
    )
    up.add_argument(
        "--mig-naming",
        choices=MIG_NAMINGS,
        help="NVIDIA's MIG device naming scheme the stand-in uses (default profile-id-start)",
    )
    up.add_argument(
        "--defaults", action="store_true", help="start from the defaults, not the saved settings"
    )
    up.add_argument(
        "--no-cache", action="store_true", help="debootstrap even if a cached root exists"
    )
    down = sub.add_parser("down", help="stop every daemon of this sandbox and unmount")
    down.add_argument("--purge", action="store_true", help="also wipe job/node state and logs")
    sub.add_parser("status", help="which daemons run; exit 0 when up, 3 when down")
    sub.add_parser("restart-ctld", help="stop slurmctld and start it again (state is kept)")
    sub.add_parser("rest-stop", help="stop only slurmrestd")
    sub.add_parser("rest-start", help="start slurmrestd again")
    sub.add_parser(
        "test-env",
        help="print `export` lines for the tests' own sandbox (dir, ports, env file); "
        "variables already set are kept",
    )
    ex = sub.add_parser("exec", help="run a command in the chroot: exec -- squeue")
    ex.add_argument("argv", nargs=argparse.REMAINDER, help="the command and its arguments")
    return p


UP_OPTIONS = (
    "nodes",
    "external_nodes",
    "accounting",
    "suite",
    "extra_conf",
    "topology",
    "node_cpus",
    "node_mem_mb",
    "node_gpus",
    "mig_nodes",
    "mig_profile",
    "mig_slices",
    "mig_full_gpus",
    "mig_layout",
    "mig_gpu",
    "mig_publish",
    "mig_naming",
)


def main(argv: list[str], environ: Mapping[str, str] | None = None) -> int:
    env = dict(os.environ if environ is None else environ)
    ns = build_parser().parse_args(argv)
    if ns.command == "test-env":
        for k, v in env_for_tests(env).items():
            print(f"export {k}={shlex.quote(v)}")
        return 0
    paths = Paths.from_env(env)
    if os.geteuid() != 0:
        _err("must run as root (it uses chroot and mount)")
        return 1
    try:
        if ns.command == "up":
            with _locked(paths):
                saved = None if ns.defaults else load_saved(paths)
                s = resolve_settings(saved, env, {k: getattr(ns, k) for k in UP_OPTIONS})
                return cmd_up(paths, s, env, ns.no_cache)
        s = _current(paths, env)
        if ns.command == "status":
            return cmd_status(paths, s, env)
        if ns.command == "exec":
            cmd = ns.argv[1:] if ns.argv[:1] == ["--"] else ns.argv
            if not cmd:
                _err("exec needs a command: exec -- squeue")
                return 2
            root = paths.root(s)
            if not (root / "etc/slurm/slurm.conf").is_file():
                _err(f"no sandbox at {root} (run: slurm-bridge sandbox slurm up)")
                return 1
            return subprocess.run(["chroot", str(root), *cmd], check=False).returncode
        args = [ns.command, "--purge"] if ns.command == "down" and ns.purge else [ns.command]
        with _locked(paths):
            rc = _run_script(args, script_env(s, paths, env)).returncode
        if rc == 0 and ns.command in ("rest-start", "restart-ctld") and paths.env_file.exists():
            cluster = parse_env_file(paths.env_file.read_text())
            url, api = cluster["SLURM_REST_URL"], cluster["SLURM_API_VERSION"]
            if not _wait_rest(url, api, paths.jwt_file, REST_READY_SECONDS):
                _err(f"slurmrestd did not answer on {url} within {REST_READY_SECONDS:.0f} s")
                return 1
        return rc
    except ConfigError as e:
        _err(str(e))
        return 2
    except BrokenPipeError:
        # our reader went away (| head): the work is done; do not die on the final flush
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
