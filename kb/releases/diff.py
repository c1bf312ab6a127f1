"""What changed between two releases, as data for the release pages and as `kb diff` text."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kb.model import Record
from kb.releases.history import History, ReleaseDiff

KINDS = (("added", "Added"), ("removed", "Removed"), ("edited", "Message edited"), ("moved", "Moved to another file"),
         ("guard", "Condition (guard) changed"))


def titles(history: History, records: Sequence[Record]) -> dict[str, str]:
    """A title for every id of the history: the record's, else its current id's, else its message."""
    out = {r.id: r.title for r in records}
    for current, appearances in history.appearances.items():
        for a in appearances:
            out.setdefault(a.id, out.get(current, a.template[:100] or a.id))
    return out


def diff_view(d: ReleaseDiff, titles: dict[str, str]) -> dict[str, Any]:
    sections = []
    for kind, label in KINDS:
        rows = [{"old": c.old, "new": c.new, "title": titles.get(c.new or c.old or "", ""), "detail": c.detail}
                for c in d.of(kind)]
        sections.append({"kind": kind, "label": label, "rows": rows})
    return {"old": d.old, "new": d.new, "sections": sections, "counts": d.counts()}


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
