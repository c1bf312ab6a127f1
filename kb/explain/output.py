"""What `kb explain` prints: text for people, JSON for programs (`--json`, the MCP tool `explain`).

Each error found leads with its first answer: the page of an error the release raises, with its
meaning and first fix. When the user pasted the wording of an older release, the releases that
raised that wording are said beside it, and where the release raises the error now. A removed
error with no live successor says so, with the nearest current error's page."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Optional

from kb.explain.match import Explanation, Found, Match
from kb.explain.prose import FIX_CHARS, fix_text, lead
from kb.urls import error_url

if TYPE_CHECKING:
    from kb.derived.values import OwnValues

SHOWN_VALUES = 12  # values of a flag written out for the user's own values
ABSOLUTE_HINT = ("Links are paths on the error site: give --site-url URL, or set KB_SITE_URL=URL, "
                 "to print whole URLs.")


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


def _url(f: Found, site_url: Optional[str], release: Optional[str]) -> Optional[str]:
    page = f.answer.id if f.answer is not None else _page(f.best.entry)
    return error_url(page, site_url, release) if page else None


def explanation_json(ex: Explanation, site_url: Optional[str] = None) -> str:
    """Each page's URL names the release the index is of (kb.urls.error_url)."""
    release = ex.release

    def match(m: Match, url: Optional[str] = None) -> dict[str, Any]:
        e = m.entry
        page = _page(e)
        return {"id": e["id"], "class": e["cls"], "file": e["file"], "line": e["line"], "function": e["func"],
                "kind": m.kind, "score": m.score, "values": dict(m.values), "title": e["title"],
                "curated": e["curated"], "meaning": e.get("meaning"), "solution": e.get("solution"),
                "derived": bool(e.get("derived")),
                "url": url or (error_url(page, site_url, release) if page else None), "releases": e.get("releases"),
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
                "url": error_url(f.answer.id, site_url, release), "releases": a.get("releases"), "via": f.answer.via,
                "note": answer_note(f)}

    def found(f: Found) -> dict[str, Any]:
        own = own_values_of(f)
        out = {"line": f.line, "message": f.message, "count": f.count, "match": match(f.best, _url(f, site_url, release)),
               "answer": answer(f), "others": [match(o) for o in f.others],
               "yourValues": None if own is None else {
                   "given": [[name, value] for name, value in own.given],
                   "flags": [{"flag": v.flag, "yours": v.yours, "passing": list(v.passing)} for v in own.flags]}}
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
    linked = False  # a page's link was printed: say once how to make it whole
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
                         f"{c['title']} ({error_url(c['id'], site_url, ex.release)})")
            linked = True
        for name, value in m.values:
            lines.append(f"    {name} = {value}")
        derived = " (derived from vLLM's source)" if h.get("derived") else ""
        cut = False
        if h.get("meaning"):
            meaning, cut = lead(str(h["meaning"]), FIX_CHARS)
            lines.append(f"  What it means{derived}: {meaning}")
        own = own_values_of(f)
        if own is not None:
            lines.append(f"  First fix, for your values: {own_values_text(own)}")
        if h.get("solution"):
            solution, cut_fix = fix_text(str(h["solution"]))
            cut = cut or cut_fix
            lines.append(f"  {'In general' if own is not None else 'First fix'}{derived}: {solution}")
        url = _url(f, site_url, ex.release)
        if url:
            lines.append(f"  {'Read on' if cut else 'Page'}: {url}")
            linked = True
        same = [o for o in (m, *f.others) if o.entry["parts"] == e["parts"] and o.id != h["id"] and not o.entry.get("older")]
        rest = [o for o in f.others if o.entry["parts"] != e["parts"]]
        if same:
            lines.append("  The same message is raised at: " + ", ".join(
                f"{o.entry['file']}:{o.entry['line']} ({o.id})" for o in same))
        if rest:
            lines.append("  Less specific templates that match too: " + ", ".join(
                f"{o.id} ({lead(str(o.entry['title']), 60)[0]})" for o in rest[:5]))
    hint = ["", ABSOLUTE_HINT] if linked and not site_url else []
    return "\n".join(lines + hint + _notes(ex)) + "\n"


def _notes(ex: Explanation) -> list[str]:
    return ["", *(f"Note: {n}" for n in ex.notes)] if ex.notes else []


def own_values_of(f: Found) -> Optional[OwnValues]:
    """What the paste's own values say of the flags its message prints (kb/derived/values.py):
    only for a match of the error's own message (not an older wording's, not a part's)."""
    e, values = f.best.entry, f.best.values
    if not e.get("checks") or e.get("older") or e.get("part") or (f.answer is not None and f.answer.id != f.best.id) \
            or f.best.kind not in ("exact", "contained", "truncated"):  # not a wording whose values differ
        return None
    if f.best.kind == "truncated" and values and f.message.rstrip().endswith(values[-1][1]):
        values = values[:-1]  # the paste may end inside its last value
    from kb.derived.values import own_values

    return own_values(e["checks"], values)


def own_values_text(own: OwnValues) -> str:
    """The user's own values in a sentence ("With config.json num_attention_heads = 6,
    --tensor-parallel-size 1, 2, 3 or 6 (you have 4) passes vLLM's check for this error") and what
    kb tried."""
    given = ", ".join(f"{name} = {_shown(value)}" for name, value in own.given)
    flags = ", or else ".join(f"{v.flag} {_listed(v.passing, f'you have {_shown(v.yours)}')}" for v in own.flags)
    tried = ("its choices" if all(v.choices for v in own.flags) else
             "1 to 16, the powers of two to 1024 and the divisors of your numbers")
    keeping = f"With {given}" if given else "Keeping the rest of your launch"
    return f"{keeping}, {flags} passes vLLM's check for this error; kb tried {tried}."


def _listed(values: tuple[Any, ...], note: str) -> str:
    shown = [_shown(v) for v in values]
    if len(shown) > SHOWN_VALUES:
        return ", ".join(shown[:5]) + ", …, " + ", ".join(shown[-5:]) + f" ({len(shown)} values; {note})"
    return (shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]) + f" ({note})"


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value) if isinstance(value, (list, dict)) else str(value)
