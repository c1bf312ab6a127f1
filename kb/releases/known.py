"""The releases kb knows without scanning them: those of the shipped wordings
(kb/releases/wording.py), each with what it added, removed and changed against the one before,
and the built release among them. What a one-release build says of releases.

The wordings keep the history's own decisions (an id's first and last release, the id it became
and when), so the added, removed, edited and moved ids of a shipped release are read from them,
not guessed again. What they do not keep is not claimed: guards (a changed condition) and lines,
and an error removed and raised again later, which they hold as raised all along. A built
release newer than the shipped ones, or between two of them, is diffed against the shipped
release before it by kb/releases/history.py's rules, as kb/releases/lineage.py does."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Optional

from kb.model import ScanResult, Wording
from kb.releases.history import Change, Raised, ReleaseDiff, diff_raised, raised_of, skeleton
from kb.releases.lineage import release_key
from kb.releases.wording import load
from kb.scan.source import release_name


@dataclass(frozen=True)
class KnownRelease:
    name: str
    errors: int  # ids raised in it
    previous: Optional[str]  # the release before it, None for the first
    counts: Optional[dict[str, Optional[int]]]  # None for the first; guard and line None: not compared
    built: bool = False  # the release this site describes


@dataclass(frozen=True)
class Known:
    """The releases kb knows, oldest first (the built one among them), and the built release's
    changes against the one before it (None when kb knows no release before it)."""

    releases: tuple[KnownRelease, ...]
    built: str
    diff: Optional[ReleaseDiff]
    ids: frozenset[str]  # what the built release raises
    wordings: Mapping[str, Wording] = field(default_factory=dict)  # every id of a shipped release
    shipped: bool = False  # whether the built release is one of the shipped wordings' releases


def present(releases: Sequence[str], items: Sequence[Wording]) -> dict[str, frozenset[str]]:
    """The ids each release raises: every release from an id's first to its last."""
    order = {r: i for i, r in enumerate(releases)}
    out: list[set[str]] = [set() for _ in releases]
    for w in items:
        first, last = order.get(w.first), order.get(w.last)
        if first is None or last is None:
            continue
        for i in range(first, last + 1):
            out[i].add(w.id)
    return {r: frozenset(s) for r, s in zip(releases, out)}


def _edit_detail(old: Wording, new: Wording) -> str:
    """What an edited message was: its old id has no page in a one-release build."""
    return "the same message" if skeleton(old.template) == skeleton(new.template) else f"was: {old.template}"


def wording_diffs(releases: Sequence[str], items: Sequence[Wording]) -> tuple[ReleaseDiff, ...]:
    """What each shipped release after the first added, removed, edited and moved, as the history
    that made the wordings decided it (one ReleaseDiff per release after the first)."""
    by_id = {w.id: w for w in items}
    became: dict[str, list[Wording]] = {}  # release -> the ids edited or moved in it
    for w in items:
        if w.next and w.ended_in and w.next in by_id:
            became.setdefault(w.ended_in, []).append(w)
    first_in: dict[str, list[Wording]] = {}
    last_in: dict[str, list[Wording]] = {}
    for w in items:
        first_in.setdefault(w.first, []).append(w)
        last_in.setdefault(w.last, []).append(w)
    out: list[ReleaseDiff] = []
    order = {"added": 0, "removed": 1, "edited": 2, "moved": 3}
    for previous, release in itertools.pairwise(releases):
        changes: list[Change] = []
        followed = {w.id for w in became.get(release, [])}
        targets = {w.next for w in became.get(release, [])}
        for w in became.get(release, []):
            new = by_id[w.next]
            if new.file == w.file:
                changes.append(Change("edited", w.id, new.id, _edit_detail(w, new)))
            else:
                changes.append(Change("moved", w.id, new.id, f"{w.file} -> {new.file}"))
        changes += [Change("added", None, w.id) for w in first_in.get(release, []) if w.id not in targets]
        changes += [Change("removed", w.id, None) for w in last_in.get(previous, []) if w.id not in followed]
        changes.sort(key=lambda c: (order[c.kind], c.old or "", c.new or ""))
        out.append(ReleaseDiff(previous, release, tuple(changes)))
    return tuple(out)


def counts(diff: ReleaseDiff) -> dict[str, Optional[int]]:
    """The diff's counts, guard and line changes None: the wordings keep neither guards nor every line."""
    return {**diff.counts(), "guard": None, "line": None}


def raised_at(items: Sequence[Wording], ids: frozenset[str]) -> dict[str, Raised]:
    """The ids of one shipped release as the diff to a later release reads them (no guard, the
    line the wordings keep)."""
    return {w.id: Raised(w.id, w.file, w.function, w.template, (w.line,)) for w in items if w.id in ids}


def known_releases(scan: ScanResult,
                   shipped: Optional[tuple[tuple[str, ...], tuple[Wording, ...]]] = None) -> Known:
    """The releases of the shipped wordings (or `shipped`) with the built release among them."""
    releases, items = shipped if shipped is not None else load()
    name = scan.tree.release or release_name(scan.tree.ref)
    ids = frozenset(s.id for s in scan.sites)
    sets = present(releases, items)
    diffs = {d.new: d for d in wording_diffs(releases, items)}
    rows = [KnownRelease(r, len(ids) if r == name else len(sets[r]), releases[i - 1] if i else None,
                         counts(diffs[r]) if r in diffs else None, r == name)
            for i, r in enumerate(releases)]
    by_id = {w.id: w for w in items}
    if name in releases:
        return Known(tuple(rows), name, diffs.get(name), ids, by_id, shipped=True)
    key = release_key(name) if scan.tree.release else None
    before = [r for r in releases if key is not None and (release_key(r) or ()) < key]
    diff = None
    if before:
        previous = max(before, key=lambda r: release_key(r) or ())
        diff = diff_raised(raised_at(items, sets[previous]), raised_of(scan), previous, name)
    built = KnownRelease(name, len(ids), diff.old if diff else None, counts(diff) if diff else None, True)
    at = next((i for i, r in enumerate(rows) if key is not None and (release_key(r.name) or ()) > key), len(rows))
    return Known((*rows[:at], built, *rows[at:]), name, diff, ids, by_id)
