"""Pages and API files that only a multi-release build has: release diffs, the ids of each
release, and the older ids (aliases) that keep their URLs working."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from kb.files import compact_json
from kb.model import Record
from kb.releases.diff import diff_view, titles
from kb.releases.history import History
from kb.site.api import SiteInfo, alias_record
from kb.site.render import redirect_page, simple_page

SHOWN = 60  # rows of each kind on a release page; the full lists are paginated below it
PAGE = 150


def release_pages(history: History, records: Sequence[Record], info: SiteInfo) -> Iterator[tuple[str, str]]:
    titles_of = titles(history, records)
    for old, (current, kind, release) in sorted(history.aliases.items()):
        yield f"errors/{old}/index.html", redirect_page(f"errors/{old}/index.html", f"errors/{current}/",
                                                        titles_of.get(current, current))
        text = compact_json(alias_record(old, current, kind, release))
        yield f"api/errors/{old}", text
        yield f"api/errors/{old}.json", text
    diffs = {d.new: d for d in history.diffs}
    summary = []
    for i, release in enumerate(history.releases):
        d = diffs.get(release)
        summary.append({"release": release, "errors": len(history.present[release]),
                        "previous": history.releases[i - 1] if i else None,
                        "counts": d.counts() if d else None})
        path = f"releases/{release}/index.html"
        view = diff_view(d, titles_of) if d else None
        yield path, simple_page(path, "release.html.jinja2", info, f"vLLM {release}: what changed",
                                release=release, count=len(history.present[release]), diff=view, shown=SHOWN)
        yield f"api/releases/{release}.json", json.dumps(
            {"release": release, "ids": sorted(history.present[release])}, separators=(",", ":")) + "\n"
        if view is not None:
            yield from _section_pages(view, release, info)
    yield "releases/index.html", simple_page("releases/index.html", "releases.html.jinja2", info, "Releases",
                                             releases=list(reversed(summary)))
    yield "api/releases.json", json.dumps({"releases": summary}, sort_keys=True, separators=(",", ":")) + "\n"


def _section_pages(view: dict[str, Any], release: str, info: SiteInfo) -> Iterator[tuple[str, str]]:
    """The full list of each kind of change too long for the release page, paginated."""
    for section in view["sections"]:
        rows = section["rows"]
        if len(rows) <= SHOWN:
            continue
        pages = [rows[i : i + PAGE] for i in range(0, len(rows), PAGE)]
        for n, chunk in enumerate(pages, start=1):
            base = f"releases/{release}/{section['kind']}/"
            sub = base + (f"page-{n}/" if n > 1 else "") + "index.html"
            yield sub, simple_page(sub, "release-list.html.jinja2", info, f"vLLM {release}: {section['label']}",
                                   release=release, section=section, rows=chunk, old=view["old"],
                                   pager={"pages": len(pages), "page": n, "base": base})
