"""Several releases -> what happened to every error between them.

Between consecutive releases an id is kept (same template and file), or it disappears and a
new one appears. A disappeared id whose function and template reappear in another file has
*moved*; one whose function in the same file now raises a very similar message was *edited*.
Both make the old id an alias of the new one, so its URLs keep working and its curated entry
follows. What is left disappeared is *removed* (its page stays, "no longer raised since"), and
new ids are *added*. Ids are never reused: the same id is always the same template and file.
"""

from __future__ import annotations

import difflib
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

from kb.model import Appearance, RaiseSite, ScanResult

EDIT_RATIO = 0.8
MOVE_LITERAL = 20  # literal characters a message needs to be followed across files by its text alone
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")


def _literal(template: str) -> int:
    return len(_PLACEHOLDER.sub("", template).strip())


@dataclass(frozen=True)
class Change:
    kind: str  # added, removed, edited, moved, guard, line
    old: Optional[str]  # old id
    new: Optional[str]  # new id
    detail: str = ""


@dataclass(frozen=True)
class ReleaseDiff:
    old: Optional[str]
    new: str
    changes: tuple[Change, ...]

    def of(self, kind: str) -> list[Change]:
        return [c for c in self.changes if c.kind == kind]

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(("added", "removed", "edited", "moved", "guard", "line"), 0)
        for c in self.changes:
            out[c.kind] += 1
        return out


@dataclass(frozen=True)
class History:
    releases: tuple[str, ...]  # oldest first
    appearances: dict[str, tuple[Appearance, ...]]  # current id -> its chain's appearances, oldest first
    aliases: dict[str, tuple[str, str, str]]  # old id -> (current id, kind, release it changed in)
    removed: dict[str, str]  # current id of an error no longer raised -> first release without it
    diffs: tuple[ReleaseDiff, ...]
    present: dict[str, frozenset[str]] = field(default_factory=dict)  # release -> ids raised in it

    def first_seen(self, ident: str) -> str:
        return self.appearances[ident][0].release


def _by_id(scan: ScanResult) -> dict[str, list[RaiseSite]]:
    out: dict[str, list[RaiseSite]] = {}
    for s in scan.sites:
        out.setdefault(s.id, []).append(s)
    return out


def diff_scans(old: ScanResult, new: ScanResult, old_name: str, new_name: str) -> ReleaseDiff:
    a, b = _by_id(old), _by_id(new)
    changes: list[Change] = []
    for ident in sorted(set(a) & set(b)):
        if a[ident][0].fact.guard != b[ident][0].fact.guard:
            changes.append(Change("guard", ident, ident, f"{a[ident][0].fact.guard} -> {b[ident][0].fact.guard}"))
        elif [s.line for s in a[ident]] != [s.line for s in b[ident]]:
            changes.append(Change("line", ident, ident, f"{a[ident][0].line} -> {b[ident][0].line}"))
    gone = sorted(set(a) - set(b))
    fresh = sorted(set(b) - set(a))
    taken: set[str] = set()
    # moved: same function and template, another file
    by_key: dict[tuple[str, str], list[str]] = {}
    for ident in fresh:
        by_key.setdefault((b[ident][0].fact.qualname, b[ident][0].template), []).append(ident)
    matched: set[str] = set()
    for ident in gone:
        key = (a[ident][0].fact.qualname, a[ident][0].template)
        for cand in by_key.get(key, []):
            if cand not in taken and b[cand][0].file != a[ident][0].file:
                taken.add(cand)
                matched.add(ident)
                changes.append(Change("moved", ident, cand, f"{a[ident][0].file} -> {b[cand][0].file}"))
                break
    # moved, with the function renamed or moved too: the same message, found once among the
    # gone and once among the new ids (a message short enough to be common is not taken)
    by_template: dict[str, list[str]] = {}
    for ident in fresh:
        if ident not in taken:
            by_template.setdefault(b[ident][0].template, []).append(ident)
    gone_by_template: dict[str, list[str]] = {}
    for ident in gone:
        if ident not in matched:
            gone_by_template.setdefault(a[ident][0].template, []).append(ident)
    for template, olds in sorted(gone_by_template.items()):
        news = by_template.get(template, [])
        if len(olds) == 1 and len(news) == 1 and _literal(template) >= MOVE_LITERAL:
            taken.add(news[0])
            matched.add(olds[0])
            changes.append(Change("moved", olds[0], news[0], f"{a[olds[0]][0].file} -> {b[news[0]][0].file}"))
    # edited: same file and function, a similar message (best pairs first)
    pairs: list[tuple[float, str, str]] = []
    by_place: dict[tuple[str, str], list[str]] = {}
    for ident in fresh:
        if ident not in taken:
            by_place.setdefault((b[ident][0].file, b[ident][0].fact.qualname), []).append(ident)
    for ident in gone:
        if ident in matched:
            continue
        place = (a[ident][0].file, a[ident][0].fact.qualname)
        for cand in by_place.get(place, []):
            m = difflib.SequenceMatcher(None, a[ident][0].template, b[cand][0].template, autojunk=False)
            if m.real_quick_ratio() > EDIT_RATIO and m.quick_ratio() > EDIT_RATIO:
                ratio = m.ratio()
                if ratio > EDIT_RATIO:
                    pairs.append((ratio, ident, cand))
    for ratio, ident, cand in sorted(pairs, key=lambda p: (-p[0], p[1], p[2])):
        if ident in matched or cand in taken:
            continue
        matched.add(ident)
        taken.add(cand)
        changes.append(Change("edited", ident, cand, f"similarity {ratio:.2f}"))
    changes += [Change("removed", i, None) for i in gone if i not in matched]
    changes += [Change("added", None, i) for i in fresh if i not in taken]
    order = {"added": 0, "removed": 1, "edited": 2, "moved": 3, "guard": 4, "line": 5}
    changes.sort(key=lambda c: (order[c.kind], c.old or "", c.new or ""))
    return ReleaseDiff(old_name, new_name, tuple(changes))


def build_history(scans: Sequence[tuple[str, ScanResult]]) -> History:
    """`scans` oldest first: (release name, scan)."""
    names = tuple(name for name, _ in scans)
    diffs: list[ReleaseDiff] = []
    successor: dict[str, tuple[str, str, str]] = {}  # old id -> (new id, kind, release)
    removed_at: dict[str, str] = {}
    present = {name: frozenset(s.id for s in scan.sites) for name, scan in scans}
    for (old_name, old), (new_name, new) in itertools.pairwise(scans):
        d = diff_scans(old, new, old_name, new_name)
        diffs.append(d)
        for c in d.changes:
            if c.kind in ("edited", "moved") and c.old and c.new:
                successor[c.old] = (c.new, c.kind, new_name)
            elif c.kind == "removed" and c.old:
                removed_at[c.old] = new_name
            elif c.kind == "added" and c.new and c.new in removed_at:  # raised again: not removed any more
                del removed_at[c.new]

    def current(ident: str) -> str:
        seen = {ident}
        while ident in successor:
            ident = successor[ident][0]
            if ident in seen:
                break
            seen.add(ident)
        return ident

    appearances: dict[str, list[Appearance]] = {}
    for name, scan in scans:
        for ident, sites in sorted(_by_id(scan).items()):
            s = sites[0]
            appearances.setdefault(current(ident), []).append(
                Appearance(name, ident, s.file, tuple(x.line for x in sites), s.template, s.fact.guard))
    aliases = {old: (current(old), kind, release) for old, (_, kind, release) in successor.items()}
    removed = {}
    for ident, release in removed_at.items():
        cur = current(ident)
        if cur not in present[names[-1]]:
            removed[cur] = release
    return History(names, {k: tuple(v) for k, v in appearances.items()}, aliases, removed, tuple(diffs), present)
