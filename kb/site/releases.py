"""The release pages and API files: in a multi-release build, every release's diff and ids and
the older ids (aliases) that keep their URLs working; in a one-release build, the releases kb
knows from its shipped wordings and the built release's changes against the one before."""

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
from kb.releases.known import Known, counts
from kb.site.api import SiteInfo, alias_record
from kb.site.render import redirect_page, simple_page

SHOWN = 40  # rows of each kind on a release page (under 50 KB with four kinds); the full lists are paginated below it
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
    newest = history.releases[-1]
    for i, release in enumerate(history.releases):
        d = diffs.get(release)
        summary.append({"release": release, "errors": len(history.present[release]),
                        "previous": history.releases[i - 1] if i else None,
                        "counts": d.counts() if d else None, "page": True, "built": release == newest})
        view = diff_view(d, titles_of) if d else None
        yield from _release_files(release, sorted(history.present[release]), view, info, None, {},
                                  first="It is the first release of this history.")
    yield from _index_files(summary, info, newest, from_wordings=False)


def known_release_pages(known: Known, records: Sequence[Record], info: SiteInfo) -> Iterator[tuple[str, str]]:
    """A one-release build's release information: /releases/ lists the releases kb knows (the
    shipped wordings), and the built release gets its page, feed and API files, its changes
    against the release before it read from the wordings. An error of an older release has no
    page in this build: its row links the live page raising the same message, else shows the text."""
    live = {r.id: r for r in records if r.removed_since is None}
    titles_of = {i: _short(w.template) or f"{w.exception_class} (no message)" for i, w in known.wordings.items()}
    titles_of |= {r.id: r.title for r in records}
    by_template: dict[str, str] = {}
    for r in sorted(live.values(), key=lambda r: r.id):
        by_template.setdefault(r.template, r.id)
    same = {i: by_template[w.template] for i, w in known.wordings.items()
            if i not in live and w.template and w.template in by_template}
    view = None
    if known.diff is not None:
        view = diff_view(known.diff, titles_of) | {"counts": counts(known.diff)}
        for section in view["sections"]:  # an older id has no page here: say what it was
            if section["kind"] in ("removed", "edited"):
                section["rows"] = [row | {"detail": _was(known, section["kind"], row["old"]) or row["detail"]}
                                   for row in section["rows"]]
    first = "" if known.diff else ("kb knows no release before it." if info.tree.release else
                                   f"{known.built} is not a release: kb cannot tell which release it follows.")
    yield from _release_files(known.built, sorted(known.ids), view, info, set(live), same, first=first,
                              from_wordings=True)
    summary = [{"release": r.name, "errors": r.errors, "previous": r.previous, "counts": r.counts, "page": r.built,
                "built": r.built} for r in known.releases]
    yield from _index_files(summary, info, known.built, from_wordings=True)


def _short(template: str, limit: int = 100) -> str:
    """A message as a title: whole, or cut at a word with an ellipsis."""
    if len(template) <= limit:
        return template
    cut = template[:limit].rsplit(" ", 1)[0]
    return (cut if len(cut) > limit // 2 else template[:limit]).rstrip(" ,.:;") + "…"


def _was(known: Known, kind: str, ident: str) -> str:
    """A removed error's file and last release; an edited one's old message."""
    w = known.wordings.get(ident)
    if w is None:
        return ""
    return f"raised in {w.file} up to {w.last}" if kind == "removed" else f"was: {w.template}"


def _release_files(release: str, ids: list[str], view: Optional[dict[str, Any]], info: SiteInfo,
                   pages: Optional[set[str]], same: dict[str, str], first: str,
                   from_wordings: bool = False) -> Iterator[tuple[str, str]]:
    """One release's page (with its long sections paginated), feed and API files. `pages`: the
    ids with a page in this build (None: every id); `same`: an id without one -> the live id
    raising the same message."""
    path = f"releases/{release}/index.html"
    linked = _linked(view, pages, same) if view is not None else None
    yield path, simple_page(path, "release.html.jinja2", info, f"vLLM {release}: what changed",
                            release=release, count=len(ids), diff=linked, shown=SHOWN, first=first,
                            from_wordings=from_wordings)
    yield f"api/releases/{release}.json", json.dumps({"release": release, "ids": ids}, separators=(",", ":")) + "\n"
    yield f"api/releases/{release}/changes.json", changes_json(release, view)
    yield f"releases/{release}/feed.xml", atom_feed(release, linked, info)
    if linked is not None:
        yield from _section_pages(linked, release, info)


def _index_files(summary: list[dict[str, Any]], info: SiteInfo, built: str,
                 from_wordings: bool) -> Iterator[tuple[str, str]]:
    yield "releases/index.html", simple_page("releases/index.html", "releases.html.jinja2", info, "Releases",
                                             releases=list(reversed(summary)), built=built,
                                             from_wordings=from_wordings)
    rows = [{k: r[k] for k in ("release", "errors", "previous", "counts")} for r in summary]
    yield "api/releases.json", json.dumps({"built": built, "releases": rows}, sort_keys=True,
                                          separators=(",", ":")) + "\n"


def _linked(view: dict[str, Any], pages: Optional[set[str]], same: dict[str, str]) -> dict[str, Any]:
    """The view's rows with the page each id links: its own (`href`, `old_href`), else for an id
    without a page the live page raising the same message (`same`), else none (text only)."""
    def page(ident: Optional[str]) -> Optional[str]:
        if ident is None:
            return None
        if pages is None or ident in pages:
            return f"errors/{ident}/"
        return f"errors/{same[ident]}/" if ident in same else None

    sections = []
    for section in view["sections"]:
        rows = []
        for row in section["rows"]:
            ident = row["new"] or row["old"]
            own = pages is None or ident in pages
            rows.append(row | {"href": page(ident), "same": not own and ident in same,
                               "old_href": f"errors/{row['old']}/" if row["old"] and (pages is None or row["old"] in pages)
                               else None})
        sections.append(section | {"rows": rows})
    return view | {"sections": sections}


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
            # an error without a page in this build: the live page of its message, else the release page
            url = f"{base}/{row['href']}" if row.get("href") else f"{base}/releases/{release}/"
            title = f"{FEED_KINDS[kind]}: {row['title'] or ident}"
            lines += ["<entry>", f"<title>{_text(title)}</title>", f"<id>{escape(f'{base}/errors/{ident}/#{release}-{kind}')}</id>",
                      f"<link href={quoteattr(url)}/>", f"<updated>{escape(updated)}</updated>",
                      f"<summary>{_text(row['detail'] or title)}</summary>", "</entry>"]
    lines.append("</feed>")
    return "\n".join(lines) + "\n"
