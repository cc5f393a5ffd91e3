"""``slurm-bridge sandbox kube-api up|down|status|serve``: a sandbox cluster
(:class:`~sandbox.cluster.SandboxCluster`: the API server with its controllers and
kubelet) as a process.

    up      --port N --kubeconfig FILE [--nodes a,b] [--kubelet]
            [--tls-cert C --tls-key K [--tls-ca CA]] [--bookmark-interval S]
            [--kube-version 1.36|1.37]
            start the server in the background (pidfile, log and state.json in the state
            dir) and wait until it answers; writes the kubeconfig.
    down    stop it (SIGTERM to the recorded pid)
    status  print the URL and pid; exit 1 if not running
    serve   run in the foreground (what ``up`` starts)
    finish-pod NAMESPACE NAME [--exit-code N] [--reason R]
            the fake kubelet's stand-in for a container exiting: the pod's phase becomes
            Succeeded (exit 0) or Failed (``POST /sandbox/pods/{ns}/{name}/finish``)
    kubeconfig --user NAME [--group G ...] --output FILE
            write a kubeconfig whose token authenticates as NAME (``POST /sandbox/tokens``);
            ServiceAccount names ``system:serviceaccount:NS:SA`` get their groups

State dir: ``$SLURM_SANDBOX_KUBE_API_DIR`` when set, else ``$SLURM_BRIDGE_SANDBOX_DIR/kube-api``
when that variable is set, else ``~/.cache/slurm-bridge/kube-api``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from sandbox.kubeapi.registry import DEFAULT_KUBE_VERSION, KUBE_VERSIONS


def state_dir() -> Path:
    explicit = os.environ.get("SLURM_SANDBOX_KUBE_API_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("SLURM_BRIDGE_SANDBOX_DIR")
    if base:
        return Path(base) / "kube-api"
    return Path.home() / ".cache" / "slurm-bridge" / "kube-api"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="slurm-bridge sandbox kube-api")
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("up", "serve"):
        s = sub.add_parser(name)
        s.add_argument("--host", default="127.0.0.1")
        s.add_argument("--port", type=int, default=6443)
        s.add_argument("--kubeconfig", default=str(state_dir() / "kubeconfig"))
        s.add_argument("--nodes", default="", help="comma-separated Ready nodes to create")
        s.add_argument("--kubelet", action="store_true", help="run the fake kubelet")
        s.add_argument("--bookmark-interval", type=float, default=5.0)
        s.add_argument(
            "--kube-version",
            choices=KUBE_VERSIONS,
            default=DEFAULT_KUBE_VERSION,
            help="which Kubernetes release's API set to serve (docs/sandbox-kube-api.md)",
        )
        s.add_argument("--tls-cert")
        s.add_argument("--tls-key")
        s.add_argument("--tls-ca", help="CA for the kubeconfig (default: the cert itself)")
        s.add_argument("--timeout", type=float, default=20.0, help="(up) seconds to wait")
    sub.add_parser("down")
    sub.add_parser("status")
    fin = sub.add_parser("finish-pod", help="a pod's containers exit (fake kubelet)")
    fin.add_argument("namespace")
    fin.add_argument("name")
    fin.add_argument("--exit-code", type=int, default=0)
    fin.add_argument("--reason")
    kc = sub.add_parser("kubeconfig", help="write a kubeconfig for a user of the running server")
    kc.add_argument("--user", required=True, help="username, e.g. system:serviceaccount:ns:sa")
    kc.add_argument("--group", action="append", default=[], help="a group (repeatable)")
    kc.add_argument("--output", "-o", required=True, help="the kubeconfig file to write")
    return p


def read_state(d: Path | None = None) -> dict[str, object] | None:
    """The running server's ``{"pid", "url", "kubeconfig"}``, or None."""
    try:
        data = json.loads(((d or state_dir()) / "state.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


async def _serve(ns: argparse.Namespace) -> None:
    from sandbox.cluster import SandboxCluster

    nodes = [n for n in ns.nodes.split(",") if n]
    srv = SandboxCluster(
        host=ns.host,
        port=ns.port,
        nodes=nodes,
        kubelet=ns.kubelet,
        bookmark_interval=ns.bookmark_interval,
        tls_cert=ns.tls_cert,
        tls_key=ns.tls_key,
        kube_version=ns.kube_version,
        # kubectl and helm send no token over plain HTTP: there, like kube-apiserver's
        # former insecure port, a request without credentials is the admin
        insecure_port=not ns.tls_cert,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with srv:
        srv.write_kubeconfig(ns.kubeconfig, ca_file=ns.tls_ca or ns.tls_cert)
        d = state_dir()
        d.mkdir(parents=True, exist_ok=True)
        (d / "state.json").write_text(
            json.dumps({"pid": os.getpid(), "url": srv.url, "kubeconfig": ns.kubeconfig})
        )
        print(f"sandbox kube-api serving on {srv.url}", flush=True)
        await stop.wait()
    with contextlib.suppress(OSError):
        (state_dir() / "state.json").unlink()


def _up(ns: argparse.Namespace, argv: list[str]) -> int:
    st = read_state()
    if st and _alive(int(str(st["pid"]))):
        print(f"already running: {st['url']} (pid {st['pid']})")
        return 0
    d = state_dir()
    d.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        (d / "state.json").unlink()
    log = open(d / "kube-api.log", "ab")  # noqa: SIM115 - handed to the child
    args = ["serve", *argv[1:]]
    proc = subprocess.Popen(
        [sys.executable, "-m", "sandbox.cluster_cli", *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    log.close()
    (d / "kube-api.pid").write_text(str(proc.pid))
    deadline = time.monotonic() + ns.timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            print(
                f"kube-api exited with {proc.returncode}; see {d / 'kube-api.log'}", file=sys.stderr
            )
            return 1
        st = read_state()
        if st:
            print(f"sandbox kube-api up: {st['url']} (pid {proc.pid})")
            print(f"export KUBECONFIG={ns.kubeconfig}")
            return 0
        time.sleep(0.05)
    print("kube-api did not come up in time", file=sys.stderr)
    return 1


def stop(d: Path | None = None, *, quiet: bool = False) -> int:
    """Stop the server whose state dir is ``d`` (default: :func:`state_dir`)."""
    d = d or state_dir()
    pidfile = d / "kube-api.pid"
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        if not quiet:
            print("not running")
        return 0
    if _alive(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
    with contextlib.suppress(OSError):
        pidfile.unlink()
    with contextlib.suppress(OSError):
        (d / "state.json").unlink()
    if not quiet:
        print("stopped")
    return 0


def _status() -> int:
    st = read_state()
    if st and _alive(int(str(st["pid"]))):
        try:
            with urllib.request.urlopen(f"{st['url']}/healthz", timeout=2):
                pass
        except OSError:
            print(f"pid {st['pid']} alive but {st['url']} does not answer")
            return 1
        print(f"running: {st['url']} (pid {st['pid']}), kubeconfig {st['kubeconfig']}")
        return 0
    print("not running")
    return 1


def _hook(what: str, path: str, body: dict[str, object]) -> tuple[dict[str, object], Any] | None:
    """POST ``body`` to the running server's ``/sandbox/<path>``: (state, answer) or None
    (the reason printed)."""
    st = read_state()
    if not st or not _alive(int(str(st["pid"]))):
        print("not running", file=sys.stderr)
        return None
    req = urllib.request.Request(
        f"{st['url']}/sandbox/{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return st, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        print(f"{what}: HTTP {e.code}: {e.read().decode()}")
    except OSError as e:
        print(f"{what}: {e}", file=sys.stderr)
    return None


def _finish_pod(ns: argparse.Namespace) -> int:
    body: dict[str, object] = {"exitCode": ns.exit_code}
    if ns.reason:
        body["reason"] = ns.reason
    where = f"{ns.namespace}/{ns.name}"
    got = _hook(f"finish-pod {where}", f"pods/{where}/finish", body)
    if got is None:
        return 1
    pod = got[1]
    print(f"pod {ns.namespace}/{ns.name}: {(pod.get('status') or {}).get('phase')}")
    return 0


def _kubeconfig(ns: argparse.Namespace) -> int:
    """The admin kubeconfig of the running server with a new token for ``--user``."""
    got = _hook(f"kubeconfig {ns.user}", "tokens", {"username": ns.user, "groups": ns.group})
    if got is None:
        return 1
    st, answer = got
    doc = yaml.safe_load(Path(str(st["kubeconfig"])).read_text())
    doc["users"] = [{"name": ns.user, "user": {"token": answer["token"]}}]
    for c in doc.get("contexts") or []:
        c["context"]["user"] = ns.user
    out = Path(ns.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    print(f"wrote {out} (user {ns.user})")
    return 0


def main(argv: list[str]) -> int:
    ns = _parser().parse_args(argv)
    if ns.cmd == "finish-pod":
        return _finish_pod(ns)
    if ns.cmd == "kubeconfig":
        return _kubeconfig(ns)
    if ns.cmd == "serve":
        asyncio.run(_serve(ns))
        return 0
    if ns.cmd == "up":
        return _up(ns, argv)
    if ns.cmd == "down":
        return stop()
    return _status()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
