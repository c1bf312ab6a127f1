"""Pages and API files that only a multi-release build has: release diffs, the ids of each
release, and the older ids (aliases) that keep their URLs working."""

from __future__ import annotations

import json
from typing import Any, Iterator, Sequence

from kb.site.api import SiteInfo, alias_record, dumps
from kb.releases.history import History, ReleaseDiff
from kb.model import Record
from kb.site.render import redirect_page, simple_page

SHOWN = 60  # rows of each kind on a release page; the full lists are paginated below it
PAGE = 150
KINDS = (("added", "Added"), ("removed", "Removed"), ("edited", "Message edited"), ("moved", "Moved to another file"),
         ("guard", "Condition (guard) changed"))


def _titles(history: History, records: Sequence[Record]) -> dict[str, str]:
    titles = {r.id: r.title for r in records}
    for current, appearances in history.appearances.items():
        for a in appearances:
            titles.setdefault(a.id, titles.get(current, a.template[:100] or a.id))
    return titles


def diff_view(d: ReleaseDiff, titles: dict[str, str]) -> dict[str, Any]:
    sections = []
    for kind, label in KINDS:
        rows = [{"old": c.old, "new": c.new, "title": titles.get(c.new or c.old or "", ""), "detail": c.detail}
                for c in d.of(kind)]
        sections.append({"kind": kind, "label": label, "rows": rows})
    return {"old": d.old, "new": d.new, "sections": sections, "counts": d.counts()}


def release_pages(history: History, records: Sequence[Record], info: SiteInfo) -> Iterator[tuple[str, str]]:
    titles = _titles(history, records)
    for old, (current, kind, release) in sorted(history.aliases.items()):
        yield f"errors/{old}/index.html", redirect_page(f"errors/{old}/index.html", f"errors/{current}/",
                                                        titles.get(current, current))
        text = dumps(alias_record(old, current, kind, release))
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
        view = diff_view(d, titles) if d else None
        yield path, simple_page(path, "release.html.jinja2", info, f"vLLM {release}: what changed",
                                release=release, count=len(history.present[release]), diff=view, shown=SHOWN)
        for section in (view["sections"] if view else []):
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
        yield f"api/releases/{release}.json", json.dumps(
            {"release": release, "ids": sorted(history.present[release])}, separators=(",", ":")) + "\n"
    yield "releases/index.html", simple_page("releases/index.html", "releases.html.jinja2", info, "Releases",
                                             releases=list(reversed(summary)))
    yield "api/releases.json", json.dumps({"releases": summary}, sort_keys=True, separators=(",", ":")) + "\n"


def diff_text(d: ReleaseDiff, titles: dict[str, str], fmt: str = "text") -> str:
    """`kb diff` output: text, markdown (for release notes) or JSON."""
    view = diff_view(d, titles)
    if fmt == "json":
        return json.dumps(view, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    counts = view["counts"]
    head = (f"vLLM {d.old} -> {d.new}: {counts['added']} added, {counts['removed']} removed, {counts['edited']} edited, "
            f"{counts['moved']} moved, {counts['guard']} with a changed guard, {counts['line']} at a moved line")
    lines = [f"## {head}" if fmt == "markdown" else head]
    for section in view["sections"]:
        if not section["rows"]:
            continue
        lines += ["", f"### {section['label']} ({len(section['rows'])})" if fmt == "markdown"
                  else f"{section['label']} ({len(section['rows'])}):"]
        for row in section["rows"]:
            ids = " -> ".join(x for x in (row["old"], row["new"]) if x) if row["old"] != row["new"] else row["old"]
            detail = f" ({row['detail']})" if row["detail"] else ""
            if fmt == "markdown":
                lines.append(f"- `{ids}` {row['title']}{detail}")
            else:
                lines.append(f"  {ids}  {row['title']}{detail}")
    return "\n".join(lines) + "\n"
