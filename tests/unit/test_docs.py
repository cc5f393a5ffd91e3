"""The README stays short and its links work; the docs site lists every page.

(The docs' own internal links are checked by ``mkdocs build --strict``, which
``deploy/test.sh`` runs; the README is not part of the site, so its links are checked here.)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = REPO / "docs"
README_MAX_LINES = 250
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """The anchor mkdocs (Python-Markdown's toc) gives a heading."""
    text = re.sub(r"[^\w\s-]", "", heading.strip().lower())
    return re.sub(r"[\s-]+", "-", text).strip("-")


def anchors(path: Path) -> set[str]:
    return {slug(m) for m in re.findall(r"^#{1,6} (.+)$", path.read_text(), flags=re.M)}


def test_readme_is_at_most_250_lines() -> None:
    n = len(README.read_text().splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines; the reference belongs in docs/"


def test_every_relative_link_in_the_readme_resolves_to_a_file_and_anchor() -> None:
    bad: list[str] = []
    for target in LINK.findall(README.read_text()):
        if re.match(r"^[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        file = REPO / path if path else README
        if not file.exists():
            bad.append(f"{target}: no file {path}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            bad.append(f"{target}: no heading with anchor #{anchor} in {path}")
    assert not bad, bad


class _MkdocsLoader(yaml.SafeLoader):
    """mkdocs.yml's own YAML: ``!!python/name:`` tags (the mermaid fence's formatter) are
    read as their names, never imported."""


_MkdocsLoader.add_multi_constructor(
    "tag:yaml.org,2002:python/name:", lambda _loader, suffix, _node: suffix
)


def test_every_docs_page_exists_has_a_title_and_is_in_the_mkdocs_nav() -> None:
    nav = yaml.load((REPO / "mkdocs.yml").read_text(), Loader=_MkdocsLoader)["nav"]

    def pages(entries: list[object]) -> set[str]:
        out: set[str] = set()
        for entry in entries:
            for value in entry.values() if isinstance(entry, dict) else [entry]:
                out |= pages(value) if isinstance(value, list) else {str(value)}
        return out

    assert pages(nav) == {p.name for p in DOCS.glob("*.md")}
    for page in DOCS.glob("*.md"):
        first = page.read_text().splitlines()[0]
        assert first.startswith("# "), f"docs/{page.name} must start with a level-1 heading"


def test_the_docs_home_page_links_every_page() -> None:
    """docs/index.md is the reference's table of contents: a page it does not link is
    found only through the site's nav (and never by a reader of the repository)."""
    linked = {t.partition("#")[0] for t in LINK.findall((DOCS / "index.md").read_text())}
    missing = sorted(p.name for p in DOCS.glob("*.md") if p.name not in linked | {"index.md"})
    assert not missing, f"docs/index.md links none of {missing}"


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("The tests' own sandbox", "the-tests-own-sandbox"),
        ("Slurm client (`bridge.slurm`)", "slurm-client-bridgeslurm"),
        ("Failures, TLS", "failures-tls"),
    ],
)
def test_anchors_are_computed_like_mkdocs(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor
