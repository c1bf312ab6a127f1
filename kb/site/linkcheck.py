"""Internal link checker for a built site: every href/src that stays inside the site must
resolve to a file (folder links to their index.html)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("href", "src") and value:
                self.links.append(value)
            if name == "id" and value:
                self.ids.add(value)


_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


def broken_links(site: Path) -> list[str]:
    """`page: link` for each internal link that points at nothing (anchors included)."""
    site = site.resolve()
    problems: list[str] = []
    ids_of: dict[Path, set[str]] = {}
    pages = sorted(site.rglob("*.html"))
    parsed: dict[Path, _Links] = {}
    for page in pages:
        p = _Links()
        p.feed(page.read_text(encoding="utf-8"))
        parsed[page] = p
        ids_of[page] = p.ids
    for page in pages:
        if page.name == "404.html":
            continue  # served at any path; its links are root-absolute
        for link in parsed[page].links:
            if _SCHEME.match(link) or link.startswith("//"):
                continue
            url, fragment = urldefrag(link)
            path = unquote(urlparse(url).path)
            if path.startswith("/"):
                problems.append(f"{page.relative_to(site)}: {link} (root-absolute: breaks under a sub-path)")
                continue
            target = (page.parent / path).resolve() if path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file() or site not in target.parents:
                problems.append(f"{page.relative_to(site)}: {link}")
                continue
            if fragment and target.suffix == ".html":
                if target not in ids_of:
                    continue
                if fragment not in ids_of[target]:
                    problems.append(f"{page.relative_to(site)}: {link} (no such anchor)")
    return problems
