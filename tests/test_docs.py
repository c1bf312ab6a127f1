"""The documentation: a short README that keeps the two commands (CI reads the test command from
it) and points into docs/, and a docs/ site whose navigation holds every page (`.ci/run` builds it
with `mkdocs build --strict`, which fails on a broken link or a page left out)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _nav_files(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [f for item in nav for f in _nav_files(item)]
    if isinstance(nav, dict):
        return [f for value in nav.values() for f in _nav_files(value)]
    return []


def test_the_readme_is_short_and_keeps_the_two_commands() -> None:
    assert len(README.splitlines()) <= 150
    lines = README.splitlines()
    main = lines.index("Install and run the main job (build the site for the pinned vLLM release, 0.34.0, into `site/`):")
    assert lines[main + 1:main + 5] == ["", "```sh", "pip install . && kb build", "```"]
    tests = lines.index("Install the test extra and run the tests:")
    assert lines[tests + 1:tests + 5] == ["", "```sh", "pip install '.[test]' && pytest", "```"]


def test_every_link_of_the_readme_into_docs_is_a_page_of_the_site() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    pages = set(_nav_files(config["nav"]))
    links = re.findall(r"\]\(docs/([^)#]+)\)", README)
    assert links and set(links) <= pages
    assert (ROOT / "docs" / "curating.md").read_text(encoding="utf-8").strip() == '--8<-- "errors/README.md"'


def test_the_navigation_holds_every_page_once() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = _nav_files(config["nav"])
    files = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    assert sorted(nav) == files and len(nav) == len(set(nav))
