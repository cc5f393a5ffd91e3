"""``slurm-bridge sandbox NAME``: the commands come from the sandbox distribution's entry
points (slurm-bridge-sandbox); without it, a clear error and exit 2, never a traceback."""

from __future__ import annotations

from importlib.metadata import EntryPoints, entry_points

import pytest

from bridge import cli


def test_every_sandbox_command_is_an_entry_point_of_the_installed_sandbox() -> None:
    found = {ep.name: ep.value for ep in entry_points(group=cli.SANDBOX_GROUP)}
    assert set(found) == set(cli.SANDBOX_COMMANDS)
    for value in found.values():
        assert value.startswith("sandbox."), value


def test_sandbox_command_without_the_sandbox_installed_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "entry_points", lambda **_: EntryPoints(()))
    assert cli.main(["sandbox", "slurm", "status"]) == 2
    err = capsys.readouterr().err
    assert "slurm-bridge sandbox slurm: the sandbox is not installed: pip install ./sandbox" in err


def test_sandbox_command_runs_the_entry_points_main_with_the_remaining_arguments(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["sandbox", "workloads", "--help"])
    assert exited.value.code == 0
    assert "slurm-bridge sandbox workloads" in capsys.readouterr().out
