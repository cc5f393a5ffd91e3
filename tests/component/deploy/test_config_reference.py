"""docs/configuration.md's table is the configuration reference: every key of
``bridge/config.py`` is in it, every default it states is the code's, and the Helm chart
renders the same value unless the row says what the chart sets instead ("Chart: ...")."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from chart_helpers import NAMESPACE, RELEASE, REPO, Helm
from test_chart import rendered_config

from bridge.config import BridgeConfig

TABLE = REPO / "docs" / "configuration.md"
SECTIONS = ("scheduler", "controller", "admission", "topology")
RELEASE_NAMESPACE = "the release namespace"
RELEASE_ACCOUNTS = "the release's scheduler and controller ServiceAccounts"


def flat(cfg: BridgeConfig) -> dict[str, Any]:
    """Every key as the table names it (``admission.port``), with its JSON value."""
    out: dict[str, Any] = {}
    for key, value in cfg.model_dump(by_alias=True, mode="json").items():
        if key in SECTIONS:
            out.update({f"{key}.{sub}": v for sub, v in value.items()})
        else:
            out[key] = value
    return out


def documented() -> dict[str, tuple[Any, str]]:
    """key -> (stated default, what the row says the chart sets, or "")."""
    rows: dict[str, tuple[Any, str]] = {}
    for line in TABLE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        keys = re.findall(r"`([^`]+)`", cells[0])
        defaults = [d.strip() for d in cells[1].split(" / ")]
        assert len(keys) == len(defaults), f"row {cells[0]}: {len(keys)} keys, {defaults}"
        chart = cells[2].split("Chart:", 1)[1].strip() if "Chart:" in cells[2] else ""
        for key, default in zip(keys, defaults, strict=True):
            value = None if default == "none" else yaml.safe_load(default.strip("`"))
            rows[key] = (value, chart)
    return rows


def test_the_configuration_table_names_every_key_of_the_code_and_no_other() -> None:
    assert set(documented()) == set(flat(BridgeConfig()))


def test_every_default_in_the_configuration_table_is_the_codes_default() -> None:
    code = flat(BridgeConfig())
    for key, (value, _) in documented().items():
        want = code[key]
        assert value == want, f"docs/configuration.md: {key} default {value!r}, code: {want!r}"


def test_the_chart_renders_each_documented_default_or_what_the_row_says(helm: Helm) -> None:
    chart = flat(rendered_config(helm.render()))
    code = flat(BridgeConfig())
    for key, (_, says) in documented().items():
        if not says:
            assert chart[key] == code[key], (
                f"{key}: the chart renders {chart[key]!r} but the table gives the code's "
                f"{code[key]!r} and no 'Chart:' note"
            )
        elif says.startswith(RELEASE_NAMESPACE):
            assert chart[key] == NAMESPACE, key
        elif says.startswith(RELEASE_ACCOUNTS):
            assert chart[key] == [
                f"system:serviceaccount:{NAMESPACE}:{RELEASE}-slurm-bridge-{c}"
                for c in ("scheduler", "controller")
            ], key
        else:
            m = re.match(r"`([^`]+)`", says)
            assert m, (
                f"{key}: 'Chart:' must be followed by {RELEASE_NAMESPACE!r}, "
                f"{RELEASE_ACCOUNTS!r} or a `value`"
            )
            assert chart[key] == yaml.safe_load(m.group(1)), key


@pytest.mark.parametrize(
    ("row", "key", "value"),
    [
        ("| `a` | `1` | x |", "a", 1),
        ("| `a` / `b` | `1` / none | x |", "b", None),
        ("| `a` | `[x, y]` | x. Chart: the release namespace |", "a", ["x", "y"]),
    ],
)
def test_table_rows_parse_into_keys_and_defaults(
    row: str, key: str, value: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    doc = tmp_path / "configuration.md"
    doc.write_text(f"| key | default | meaning |\n|---|---|---|\n{row}\n")
    monkeypatch.setattr(f"{__name__}.TABLE", doc)
    assert documented()[key][0] == value
