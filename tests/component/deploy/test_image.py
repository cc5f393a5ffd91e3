"""The container image: Dockerfile lint and contract, pinned dependencies, and the wheel.

No Docker engine runs here, so the image itself cannot be built. What the builder stage
does is reproduced instead: copy exactly the files the Dockerfile COPYs (and that
.dockerignore lets through), ``pip wheel . --no-deps``, install that wheel with the
constraints file into a fresh virtualenv, and run ``slurm-bridge version``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest
from chart_helpers import REPO, venv_bin
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from bridge import __version__

DOCKERFILE = REPO / "Dockerfile"
CONSTRAINTS = REPO / "deploy" / "constraints.txt"


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def _stages() -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for instr in _instructions(DOCKERFILE.read_text()):
        if instr[0] == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(instr)
    return stages


def _copy_sources() -> list[str]:
    sources = []
    for stage in _stages():
        for word, args in stage:
            if word == "COPY" and "--from=" not in args:
                parts = args.split()
                sources += parts[:-1]
    return sources


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args), cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


def test_hadolint_finds_nothing_in_the_dockerfile() -> None:
    proc = _run(venv_bin("hadolint"), "--failure-threshold", "style", str(DOCKERFILE))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dockerfile_final_stage_is_pinned_non_root_and_read_only_friendly() -> None:
    text = DOCKERFILE.read_text()
    (default_image,) = re.findall(r"^ARG PYTHON_IMAGE=(\S+)$", text, re.M)
    assert re.fullmatch(r"python:3\.11\.\d+-slim(-\w+)?", default_image), "pin an exact tag"
    assert "@sha256:" in text, "the Dockerfile says how to pin the base image by digest"
    stages = _stages()
    assert len(stages) >= 2, "multi-stage: build tools stay in the builder"
    final = stages[-1]
    final_text = "\n".join(f"{w} {a}" for w, a in final)
    assert ("USER", "65532:65532") in final
    assert ("ENTRYPOINT", '["slurm-bridge"]') in final
    assert "PYTHONDONTWRITEBYTECODE=1" in final_text
    assert "HOME=/tmp" in final_text, "nothing may write outside /tmp"
    for tool in ("apt-get", "gcc", "build-essential", "pip wheel", "pip install"):
        assert tool not in final_text, f"{tool} in the final stage"
    assert "org.opencontainers.image.title" in final_text
    assert "pip wheel" in "\n".join(a for w, a in stages[0] if w == "RUN")


def test_build_context_allow_list_lets_every_copied_file_through() -> None:
    allowed = {
        line[1:].rstrip("/")
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    assert "*" in (REPO / ".dockerignore").read_text().splitlines(), "an allow-list"
    for source in _copy_sources():
        assert (REPO / source).exists(), source
        assert source.rstrip("/") in allowed, f"{source} is COPYed but .dockerignore drops it"


def test_constraints_pin_every_runtime_dependency_exactly_and_satisfy_pyproject() -> None:
    pins: dict[str, str] = {}
    for line in CONSTRAINTS.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep, f"not an exact pin: {line!r}"
        assert version, f"not an exact pin: {line!r}"
        pins[canonicalize_name(name)] = version
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for dep in project["dependencies"]:
        req = Requirement(dep)
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} (pyproject) missing from deploy/constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"{req.name}=={pins[name]} does not satisfy pyproject's {req.specifier}"
        )


@pytest.fixture
def build_context(tmp_path: Path) -> Path:
    """Exactly the files the Dockerfile copies into the builder."""
    ctx = tmp_path / "context"
    for source in _copy_sources():
        src, dst = REPO / source, ctx / source
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, dst)
    return ctx


def test_wheel_builds_from_the_image_context_installs_pinned_and_runs(
    build_context: Path, tmp_path: Path
) -> None:
    dist = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    proc = _run(*pip, "wheel", ".", "--no-deps", "--wheel-dir", str(dist), cwd=build_context)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = dist.glob("slurm_bridge-*.whl")

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)  # like the image: a venv without pip
    py = str(env_dir / "bin" / "python")
    proc = _run(*pip, "--python", py, "install", "-q", "--constraint", str(CONSTRAINTS), str(wheel))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = _run(*pip, "--python", py, "check")
    assert proc.returncode == 0, proc.stdout
    proc = _run(str(env_dir / "bin" / "slurm-bridge"), "version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"slurm-bridge {__version__}"
    proc = _run(py, "-c", "import bridge, scheduler, controller, admission")
    assert proc.returncode == 0, proc.stderr
    # the sandboxes are not in the image: their commands say how to get them, nothing crashes
    proc = _run(str(env_dir / "bin" / "slurm-bridge"), "sandbox", "slurm", "status")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "the sandbox is not installed: pip install ./sandbox" in proc.stderr
