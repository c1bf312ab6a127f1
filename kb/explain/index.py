"""The compiled match index: every template split into literal parts, for the site's
paste-your-error search and for `kb explain`. One index, written by the build
(`/api/match-index.json.gz`), read by both, so they cannot disagree."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kb.files import compact_json
from kb.model import Record, Wording
from kb.scan.literals import literal_parts, matchable

# What only building the index needs (the guidance, its Markdown, titles) is imported where it is
# built: `kb explain` imports this module to match, and answers in a blink.

MATCH_FORMAT = "kb-match/1"


def _text(template: str) -> dict[str, Any]:
    """The fields the matcher reads of one template."""
    parts, names = literal_parts(template)
    return {"parts": parts, "names": names, "literal": sum(len(p) for p in parts), "matchable": matchable(parts)}


def wording_entry(w: Wording) -> dict[str, Any]:
    """The index entry of a wording (an id of some release, from the wordings' history): what the
    matcher reads of its template, and where it was raised."""
    from kb.records.present import title_of

    return _text(w.template) | {
        "id": w.id, "title": title_of(w.template, w.exception_class, w.function), "cls": w.exception_class,
        "file": w.file, "line": w.line, "func": w.function, "releases": [w.first, w.last],
        "chain": w.chain or w.current or w.id}


def match_index(records: Sequence[Record], release: str | None,
                wordings: Sequence[Wording] = ()) -> dict[str, Any]:
    """Every template the release raises, then every older wording (`wordings`: the ids of other
    releases, with the releases that raised them and what became of them)."""
    entries = []
    pages = {r.id for r in records}  # ids with a page in this build (removed ones too)
    raised = {w.id: w for w in wordings}
    for r in records:
        if r.removed_since is not None:
            continue
        entry: dict[str, Any] = {
            "id": r.id,
            "title": r.title,
            "cls": r.exception_class,
            "file": r.file,
            "line": r.line,
            "func": r.sites[0].fact.qualname,
            "curated": r.curated,
            "chain": r.id,
        } | _curated(r)
        if r.id in raised:
            entry["releases"] = [raised[r.id].first, raised[r.id].last]
        entries.append(entry | _text(r.template) | _message_checks(r))
        # A part of the message (`" ".join(errors)`, or built by a function or the exception class),
        # each on its own, with the class and line of the raise it belongs to: raises without a
        # message of their own share one id in a file, whatever their class.
        seen: set[tuple[str, str]] = set()
        for s in r.sites:
            for part in s.fact.parts:
                if (part, s.exception_class) not in seen:
                    seen.add((part, s.exception_class))
                    entries.append(entry | {"cls": s.exception_class, "line": s.line} | _text(part) | {"part": True})
    current = {r.id: r for r in records if r.removed_since is None}
    from kb.explain.successors import SUCCESSOR, removed_answers  # it reads literal_parts of this module

    # the wording of an error no longer raised: the live error whose page answers for it (kb/explain/successors.py)
    answers = removed_answers(records, wordings)
    for w in wordings:
        if w.id in current:
            continue
        answer, via = (current[w.current], SUCCESSOR) if w.current in current else answers.get(w.id, (None, ""))
        successor = answer if via == SUCCESSOR else None
        entries.append(wording_entry(w) | {
            "curated": answer.curated if answer else False, "older": True,
            "current": successor.id if successor else None,
            "currentTemplate": successor.template if successor else None,
            "endedIn": w.ended_in,
            "page": answer.id if answer else w.id if w.id in pages else None,
        } | ({"via": via} | _curated(answer) if answer else {}))
    return {"format": MATCH_FORMAT, "release": release, "entries": entries}


def _curated(r: Record) -> dict[str, Any]:
    """What the lookup shows of an error: its meaning (a plain-text preview) and first fix as its page
    gives them (curated, else derived from vLLM's source: `derived` says so; kb/derived/guidance.py).
    The fix is Markdown (`kb explain` and its JSON read it so), and a plain-text preview for the
    site's results list, which renders no Markdown."""
    from kb.derived.guidance import guidance
    from kb.entries.plain import preview

    g = guidance(r)
    if not g.meaning and not g.first_fix:
        return {}
    out = {"meaning": preview(g.meaning), "solution": g.first_fix}
    if g.first_fix:
        out["fixText"] = preview(g.first_fix)
    derived = "derived" in (g.meaning_from, g.solutions_from)
    return out | {"derived": True} if derived else out


def _message_checks(r: Record) -> dict[str, Any]:
    """The derived checks whose message prints a flag they read: `kb explain` puts a paste's own
    values to them (kb/derived/values.py)."""
    d = r.derived
    return {"checks": [c.to_json() for c in d.message_checks]} if d is not None and d.message_checks else {}


# The fields of an index entry and their JSON types: what the matcher and its output read.
_REQUIRED: dict[str, tuple[type, ...]] = {
    "id": (str,), "title": (str,), "cls": (str,), "file": (str,), "line": (int,), "func": (str,),
    "curated": (bool,), "parts": (list,), "names": (list,), "literal": (int,), "matchable": (bool,)}
_OPTIONAL: dict[str, tuple[type, ...]] = {
    "meaning": (str,), "solution": (str,), "fixText": (str,), "derived": (bool,), "text": (str,), "releases": (list,), "older": (bool,), "part": (bool,),
    "current": (str, type(None)), "currentTemplate": (str, type(None)), "endedIn": (str, type(None)),
    "page": (str, type(None)), "via": (str,), "checks": (list,)}


def index_problem(index: object) -> str | None:
    """What is wrong with a match index read from a file (a hand-made --index, a truncated or
    edited cache), or None: the matcher then reads every field it needs with the right type."""
    if not isinstance(index, dict):
        return "a JSON object is expected"
    if index.get("format") != MATCH_FORMAT:
        return f"its format is {str(index.get('format'))[:40]!r}, not {MATCH_FORMAT!r}"
    entries = index.get("entries")
    if not isinstance(entries, list):
        return "'entries' must be a list"
    for n, e in enumerate(entries):
        if not isinstance(e, dict):
            return f"entry {n}: a JSON object is expected"
        for key, types in _REQUIRED.items():
            if not isinstance(e.get(key), types) or (types == (int,) and isinstance(e[key], bool)):
                return f"entry {n}: {key!r} is missing or not {types[0].__name__}"
        for key, types in _OPTIONAL.items():
            if key in e and not isinstance(e[key], types):
                return f"entry {n}: {key!r} is not {types[0].__name__}"
        parts, names = e["parts"], e["names"]
        if not parts or not all(isinstance(p, str) for p in parts) or not all(isinstance(v, str) for v in names):
            return f"entry {n}: 'parts' and 'names' must be lists of strings, 'parts' not empty"
        if "releases" in e and (len(e["releases"]) != 2 or not all(isinstance(r, str) for r in e["releases"])):
            return f"entry {n}: 'releases' must be [first, last]"
        if e.get("older") and not isinstance(e.get("releases"), list):
            return f"entry {n}: older wording without 'releases'"
    return None


def match_index_json(records: Sequence[Record], release: str | None, wordings: Sequence[Wording] = ()) -> str:
    """The file `/api/match-index.json.gz`, as the site, the MkDocs plugin and `kb explain` read it."""
    return compact_json(match_index(records, release, wordings))
