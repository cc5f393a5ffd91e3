"""Helpers of the deploy checks: paths, a helm runner with a render cache."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]
CHART = REPO / "deploy" / "helm" / "slurm-bridge"
CI_VALUES = CHART / "ci"
RELEASE = "sb"
NAMESPACE = "slurm-bridge-system"


def venv_bin(name: str) -> str:
    """A console script installed next to the running interpreter (the test venv)."""
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else name


@dataclass(frozen=True)
class Rendered:
    docs: list[dict[str, Any]]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == kind]

    def one(self, kind: str, name: str) -> dict[str, Any]:
        found = [d for d in self.of_kind(kind) if d["metadata"]["name"] == name]
        assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
        return found[0]

    def config_text(self) -> str:
        cm = self.one("ConfigMap", f"{RELEASE}-slurm-bridge-config")
        text: str = cm["data"]["config.yaml"]
        return text


@dataclass
class Helm:
    binary: str
    _cache: dict[tuple[Any, ...], Rendered] = field(default_factory=dict)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.binary, *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "HELM_CACHE_HOME": "/tmp/slurm-bridge-helm-cache"},
        )

    def template(
        self,
        values_files: Iterable[str] = (),
        sets: Iterable[str] = (),
        set_json: Iterable[str] = (),
        namespace: str = NAMESPACE,
    ) -> subprocess.CompletedProcess[str]:
        args = ["template", RELEASE, str(CHART), "--namespace", namespace]
        for f in values_files:
            args += ["--values", str(CI_VALUES / f)]
        for s in sets:
            args += ["--set", s]
        for s in set_json:
            args += ["--set-json", s]
        return self.run(*args)

    def render(self, *values_files: str, sets: tuple[str, ...] = ()) -> Rendered:
        key = (values_files, sets)
        if key not in self._cache:
            proc = self.template(values_files, sets)
            assert proc.returncode == 0, f"helm template failed:\n{proc.stderr}"
            docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
            self._cache[key] = Rendered(docs)
        return self._cache[key]
