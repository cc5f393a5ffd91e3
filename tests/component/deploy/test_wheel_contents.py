"""The runtime wheel holds the product only: the sandboxes (``sandbox/``, test and demo
tooling) are their own distribution, slurm-bridge-sandbox, and never ship with the bridge.

The wheel is built from a copy of the source tree with ``sandbox/`` beside the product's
packages, as it is in the repository, so pyproject.toml's package list is what is checked.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from chart_helpers import REPO

PRODUCT = {"bridge", "scheduler", "controller", "admission"}


def _build_wheel(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")
    for name in ("pyproject.toml", "README.md"):
        src.mkdir(exist_ok=True)
        shutil.copy2(REPO / name, src / name)
    for package in (*sorted(PRODUCT), "sandbox"):
        shutil.copytree(REPO / package, src / package, ignore=skip)
    dist = tmp_path / "dist"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "wheel", ".", "--no-deps",
         "--wheel-dir", str(dist)],
        cwd=src, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = dist.glob("slurm_bridge-*.whl")
    return wheel


def test_runtime_wheel_holds_only_the_product_packages_and_no_sandbox(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        declared = zf.read(entry_points).decode()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == PRODUCT
    assert not [n for n in names if "sandbox" in Path(n).parts or "sandbox" in Path(n).stem]
    assert not [n for n in names if n.endswith((".sh", ".yaml"))], "sandbox package data"
    assert "slurm_bridge.sandbox" not in declared


def test_every_product_package_is_listed_for_the_wheel() -> None:
    """A package missing from pyproject.toml's list is missing from the wheel and the
    image: every ``import`` of it fails there (bridge.devices, bridge.workloads once)."""
    listed = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    packages = {
        ".".join(init.parent.relative_to(REPO).parts)
        for top in PRODUCT
        for init in (REPO / top).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert packages - listed == set(), "add them to [tool.setuptools] packages"
