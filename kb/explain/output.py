"""What `kb explain` prints: text for people, JSON for programs (`--json`, the MCP tool `explain`).

Each error found leads with its first answer: the page of an error the release raises, with its
meaning and first fix. When the user pasted the wording of an older release, the releases that
raised that wording are said beside it, and where the release raises the error now. A removed
error with no live successor says so, with the nearest current error's page."""

from __future__ import annotations

import json
from typing import Any, Optional

from kb.explain.match import Explanation, Found, Match


def page_url(ident: str, site_url: Optional[str]) -> str:
    """An error page's URL: under `site_url`, else the site's own path."""
    return f"{site_url.rstrip('/')}/errors/{ident}/" if site_url else f"/errors/{ident}/"


def _page(entry: dict[str, Any]) -> Optional[str]:
    """The id whose page answers for this entry: its own, its successor's, or none."""
    return str(entry["page"]) if entry.get("page") else None if entry.get("older") else str(entry["id"])


def _span(entry: dict[str, Any]) -> str:
    first, last = entry["releases"]
    return first if first == last else f"{first}–{last}"


def template_of(entry: dict[str, Any]) -> str:
    """An index entry's message as a template (its literal parts, `{name}` between them)."""
    parts, names = entry["parts"], entry["names"]
    return str(parts[0]) + "".join("{" + str(n) + "}" + str(p) for n, p in zip(names, parts[1:]))


def wording_note(entry: dict[str, Any]) -> Optional[str]:
    """What the lookup says of older wording: which releases raised it, what it reads now."""
    if not entry.get("older"):
        return None
    first, last = entry["releases"]
    span = _span(entry)
    if entry.get("current"):
        return (f"This is the wording of vLLM {span}; since {entry['endedIn']} it reads: "
                f"{entry['currentTemplate']} -> {entry['current']}")
    return f"Raised up to vLLM {last} (from {first}); removed in {entry['endedIn']}."


def answer_note(f: Found) -> Optional[str]:
    """The user's wording beside the first answer: which releases raised it, and where the
    release raises the error now."""
    a, e = f.answer, f.best.entry
    if a is None or not e.get("older"):
        return None
    if a.via == "successor":
        return wording_note(e)
    where = f"{a.entry['file']}:{a.entry['line']}"
    gone = f", removed in {e['endedIn']}" if e.get("endedIn") else ""
    own = f"Your wording is vLLM {_span(e)}'s ({e['file']}:{e['line']}{gone})"
    if a.entry["parts"] == e["parts"]:
        return f"{own}; today the same message is raised at {where}."
    if a.via == "declared":
        return (f"{own}; today this check is made at {where}, the successor its curated entry declares: "
                f"{template_of(a.entry)}")
    return f"{own}; today the same error is raised at {where}: {template_of(a.entry)}"


def _head(f: Found) -> dict[str, Any]:
    """The index entry the answer leads with: the live error's, else the match's own."""
    return f.answer.entry if f.answer is not None else f.best.entry


def _url(f: Found, site_url: Optional[str]) -> Optional[str]:
    page = f.answer.id if f.answer is not None else _page(f.best.entry)
    return page_url(page, site_url) if page else None


def explanation_json(ex: Explanation, site_url: Optional[str] = None) -> str:
    def match(m: Match, url: Optional[str] = None) -> dict[str, Any]:
        e = m.entry
        page = _page(e)
        return {"id": e["id"], "class": e["cls"], "file": e["file"], "line": e["line"], "function": e["func"],
                "kind": m.kind, "score": m.score, "values": dict(m.values), "title": e["title"],
                "curated": e["curated"], "meaning": e.get("meaning"), "solution": e.get("solution"),
                "derived": bool(e.get("derived")),
                "url": url or (page_url(page, site_url) if page else None), "releases": e.get("releases"),
                "olderWording": bool(e.get("older")), "currentId": e.get("current", e["id"]),
                "currentTemplate": e.get("currentTemplate"), "endedIn": e.get("endedIn"),
                "differences": list(m.differences)}

    def answer(f: Found) -> Optional[dict[str, Any]]:
        if f.answer is None:
            return None
        a = f.answer.entry
        return {"id": a["id"], "class": a["cls"], "file": a["file"], "line": a["line"], "function": a["func"],
                "title": a["title"], "curated": a["curated"], "meaning": a.get("meaning"),
                "solution": a.get("solution"), "derived": bool(a.get("derived")),
                "url": page_url(f.answer.id, site_url), "releases": a.get("releases"), "via": f.answer.via,
                "note": answer_note(f)}

    def found(f: Found) -> dict[str, Any]:
        out = {"line": f.line, "message": f.message, "count": f.count, "match": match(f.best, _url(f, site_url)),
               "answer": answer(f), "others": [match(o) for o in f.others]}
        if f.closest is not None:
            out["closestCurrent"] = match(f.closest)
        return out

    data: dict[str, Any] = {"found": [found(f) for f in ex.found], "suggestions": [match(s) for s in ex.suggestions]}
    if ex.notes:  # only then: the answer to a whole input keeps its shape
        data["notes"] = list(ex.notes)
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


_HOW = {"exact": "", "contained": " (found inside a longer text)",
        "truncated": " (the message is cut off; matched its start)"}


def explanation_text(ex: Explanation, site_url: Optional[str] = None) -> str:
    lines: list[str] = []
    if not ex.found:
        lines.append("No known vLLM error matches this text.")
        if ex.suggestions:
            lines += ["", "Closest templates (similarity of their words, not a match):"]
            for s in ex.suggestions:
                lines.append(f"  {s.score:.2f}  {s.id}  {s.entry['title']}  ({s.entry['file']}:{s.entry['line']})")
        return "\n".join(lines + _notes(ex)) + "\n"
    n = len(ex.found)
    lines.append(f"Found {n} vLLM error{'s' if n > 1 else ''}:")
    for f in ex.found:
        e, m, h = f.best.entry, f.best, _head(f)
        lines += ["", f"{h['id']}  {h['cls']}  {h['file']}:{h['line']}  ({h['func']})"]
        how = _HOW.get(m.kind, " (probably: the wording differs, " + "; ".join(m.differences) + ")")
        seen = f", seen {f.count} times" if f.count > 1 else ""
        lines.append(f"  at line {f.line} of the input{seen}{how}: {h['title']}")
        note = answer_note(f) if f.answer is not None else wording_note(e)
        if note:
            lines.append(f"  {note}")
        if f.closest is not None and f.answer is None:
            c = f.closest.entry
            lines.append(f"  The closest current error (similarity {f.closest.score:.2f}, not this error): {c['id']} "
                         f"{c['title']} ({page_url(c['id'], site_url)})")
        for name, value in m.values:
            lines.append(f"    {name} = {value}")
        derived = " (derived from vLLM's source)" if h.get("derived") else ""
        if h.get("meaning"):
            lines.append(f"  What it means{derived}: {h['meaning']}")
        if h.get("solution"):
            lines.append(f"  First fix{derived}: {h['solution']}")
        url = _url(f, site_url)
        if url:
            lines.append(f"  {url}")
        same = [o for o in (m, *f.others) if o.entry["parts"] == e["parts"] and o.id != h["id"] and not o.entry.get("older")]
        rest = [o for o in f.others if o.entry["parts"] != e["parts"]]
        if same:
            lines.append("  The same message is raised at: " + ", ".join(
                f"{o.entry['file']}:{o.entry['line']} ({o.id})" for o in same))
        if rest:
            lines.append("  Less specific templates that match too: " + ", ".join(
                f"{o.id} ({o.entry['title'][:60]})" for o in rest[:5]))
    return "\n".join(lines + _notes(ex)) + "\n"


def _notes(ex: Explanation) -> list[str]:
    return ["", *(f"Note: {n}" for n in ex.notes)] if ex.notes else []
