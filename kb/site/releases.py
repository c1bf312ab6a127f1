"""Pages and API files that only a multi-release build has: release diffs, the ids of each
release, and the older ids (aliases) that keep their URLs working."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any, Optional
from xml.sax.saxutils import escape, quoteattr

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
        # one file, as for every other record: /_redirects answers <id>.json on Netlify and Cloudflare
        yield f"api/errors/{old}", compact_json(alias_record(old, current, kind, release))
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
        yield f"api/releases/{release}/changes.json", changes_json(release, view)
        yield f"releases/{release}/feed.xml", atom_feed(release, view, info)
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


def changes_json(release: str, view: Optional[dict[str, Any]]) -> str:
    """/api/releases/<v>/changes.json: the errors the release added, removed and changed against
    the one before (kb diff's JSON); the first release has no changes to list."""
    body = view if view is not None else {"old": None, "new": release, "sections": [], "counts": None}
    return json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _text(value: str) -> str:
    """Text for XML 1.0: escaped, and without the characters XML cannot hold (a scanned message may)."""
    return escape(_NOT_XML.sub("\ufffd", value))


FEED_KINDS = {"added": "added", "removed": "removed", "edited": "message edited", "moved": "moved to another file",
              "guard": "condition changed"}  # a moved line alone is not news


def atom_feed(release: str, view: Optional[dict[str, Any]], info: SiteInfo) -> str:
    """releases/<v>/feed.xml: an Atom feed of the errors the release added, removed and changed.
    Its dates are the scanned release's (never the clock), so two builds are the same."""
    base = info.site_url or ""
    updated = info.tree.commit_date or "1970-01-01T00:00:00Z"
    lines = ['<?xml version="1.0" encoding="utf-8"?>', '<feed xmlns="http://www.w3.org/2005/Atom">',
             f"<title>{escape(f'vLLM {release}: errors added, removed and changed')}</title>",
             f"<id>{escape(f'{base}/releases/{release}/')}</id>",
             f"<link href={quoteattr(f'{base}/releases/{release}/')}/>",
             f"<link rel=\"self\" href={quoteattr(f'{base}/releases/{release}/feed.xml')}/>",
             f"<updated>{escape(updated)}</updated>", "<author><name>vLLM Error KB</name></author>"]
    for section in (view or {}).get("sections", []):
        kind = section["kind"]
        if kind not in FEED_KINDS:
            continue
        for row in section["rows"]:
            ident = row["new"] or row["old"]
            url = f"{base}/errors/{ident}/"
            title = f"{FEED_KINDS[kind]}: {row['title'] or ident}"
            lines += ["<entry>", f"<title>{_text(title)}</title>", f"<id>{escape(f'{url}#{release}-{kind}')}</id>",
                      f"<link href={quoteattr(url)}/>", f"<updated>{escape(updated)}</updated>",
                      f"<summary>{_text(row['detail'] or title)}</summary>", "</entry>"]
    lines.append("</feed>")
    return "\n".join(lines) + "\n"
