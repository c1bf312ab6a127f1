"""Every wording of every error across releases: ids, templates, where and when they were
raised, and what became of them (the current id, or removed since). No source is kept: the
lookup needs only this to recognise a message of any release.

The wordings of the published releases ship with kb (`wordings.json.gz`, made by
`kb wordings` from the real wheels and extended by `kb release` one release at a time), so
that a build of one release, on a fresh machine, already knows the older wording of its
errors, and the curated entries written for an older id follow it (kb/releases/lineage.py)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path

from kb.errors import KBError
from kb.files import gzip_text
from kb.model import Appearance, ScanResult, Wording
from kb.releases.history import History, Raised, ReleaseDiff

SHIPPED = Path(__file__).with_name("wordings.json.gz")
FORMAT = "kb-wordings/3"


def wordings(scans: Sequence[tuple[str, ScanResult]], history: History) -> tuple[Wording, ...]:
    """One wording per id of any release (scans oldest first, as for `build_history`)."""
    where: dict[str, tuple[int, str, str]] = {}  # id -> (line, function, class) in the last release raising it
    for _, scan in scans:
        for s in scan.sites:
            if s.id not in where or where[s.id][0] != s.line:
                where[s.id] = (s.line, s.fact.qualname, s.exception_class)
    out: list[Wording] = []
    for current, appearances in history.appearances.items():
        removed = history.removed.get(current)
        by_id: dict[str, list[str]] = {}
        last_of: dict[str, Appearance] = {}
        for a in appearances:
            by_id.setdefault(a.id, []).append(a.release)
            last_of[a.id] = a
        for ident, releases in by_id.items():
            a = last_of[ident]
            line, function, cls = where[ident]
            ended = history.aliases[ident][2] if ident in history.aliases else removed
            out.append(Wording(ident, a.template, a.file, line, function, cls, releases[0], releases[-1],
                               None if removed else current, ended, current, history.successors.get(ident, "")))
    return tuple(sorted(out, key=lambda w: w.id))


def raised_in(items: Sequence[Wording], release: str) -> dict[str, Raised]:
    """The ids the newest release of `items` raises, as the diff to a next release reads them
    (no guard, the line the wordings keep)."""
    return {w.id: Raised(w.id, w.file, w.function, w.template, (w.line,)) for w in items if w.last == release}


def extend(items: Sequence[Wording], releases: Sequence[str], diff: ReleaseDiff, scan: ScanResult) -> \
        tuple[Wording, ...]:
    """The wordings of `releases` with one newer release added (`scan`, `diff.new`), `diff`
    being what became of the newest release's ids in it: what `wordings()` gives for all the
    releases' scans, without them (kb/releases/history.py's rules, one step further)."""
    name, last = diff.new, releases[-1]
    known = {w.id: w for w in items}
    successor = {w.id: (w.next, w.ended_in or name) for w in items if w.next}
    removed_at = {w.id: w.ended_in for w in items if not w.next and w.ended_in and w.last != last}
    for c in diff.changes:
        if c.kind in ("edited", "moved") and c.old and c.new:
            successor[c.old] = (c.new, name)
        elif c.kind == "removed" and c.old:
            removed_at[c.old] = name
        elif c.kind == "added" and c.new and c.new in removed_at:
            del removed_at[c.new]
    present = {s.id for s in scan.sites}

    def current(ident: str) -> str:
        seen = {ident}
        while ident in successor:
            ident = successor[ident][0]
            if ident in seen:
                break
            seen.add(ident)
        return ident

    removed: dict[str, str] = {}
    for ident, release in removed_at.items():
        cur = current(ident)
        if cur not in present:
            removed[cur] = release
    where = {w.id: (w.line, w.function, w.exception_class) for w in items}
    fresh: dict[str, tuple[str, str]] = {}  # id -> (template, file) of an id no release before raised
    for s in scan.sites:
        if s.id not in where or where[s.id][0] != s.line:
            where[s.id] = (s.line, s.fact.qualname, s.exception_class)
        if s.id not in known:
            fresh.setdefault(s.id, (s.template, s.file))
    out: list[Wording] = []
    for ident in sorted(known.keys() | present):
        w = known.get(ident)
        template, file = (w.template, w.file) if w is not None else fresh[ident]
        line, function, cls = where[ident]
        chain = current(ident)
        gone = removed.get(chain)
        ended = successor[ident][1] if ident in successor else gone
        out.append(Wording(ident, template, file, line, function, cls, w.first if w is not None else name,
                           name if ident in present else (w.last if w is not None else name),
                           None if gone else chain, ended, chain, successor[ident][0] if ident in successor else ""))
    return tuple(out)


def dumps(items: Sequence[Wording], releases: Sequence[str]) -> bytes:
    """Deterministic gzip of the compact JSON (no file name, no time in the header)."""
    rows = [[w.id, w.template, w.file, w.line, w.function, w.exception_class, w.first, w.last, w.current,
             w.ended_in, w.chain, w.next] for w in items]
    text = json.dumps({"format": FORMAT, "releases": list(releases), "wordings": rows}, ensure_ascii=False,
                      separators=(",", ":"), sort_keys=True)
    return gzip_text(text)


@lru_cache(maxsize=4)
def load(path: Path = SHIPPED) -> tuple[tuple[str, ...], tuple[Wording, ...]]:
    """(releases it was made from, oldest first; the wordings). Empty when there is no file.
    Read once per process: jobs over many releases ask for it each time."""
    if not path.is_file():
        return (), ()
    try:
        data = json.loads(gzip.decompress(path.read_bytes()))
        if data.get("format") != FORMAT:
            raise ValueError(f"not {FORMAT}")
        items = tuple(Wording(*row) for row in data["wordings"])
        return tuple(data["releases"]), items
    except (OSError, ValueError, KeyError, TypeError, EOFError, gzip.BadGzipFile) as e:
        raise KBError(f"not a readable wordings file: {e}", str(path)) from None


def chains(items: Sequence[Wording]) -> Mapping[str, list[Wording]]:
    """Each error's wordings (by the last id of its history), oldest first."""
    out: dict[str, list[Wording]] = {}
    for w in items:
        out.setdefault(w.chain, []).append(w)
    return out
