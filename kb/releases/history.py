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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Optional

from kb.model import Appearance, RaiseSite, ScanResult
from kb.scan.messages import sub_placeholders, template_parts

EDIT_RATIO = 0.8
RENAMED_EDIT_RATIO = 0.9  # a message in the same file whose function was renamed too
MOVE_LITERAL = 20  # literal characters a message needs to be followed across files by its text alone


def _literal(template: str) -> int:
    return len(sub_placeholders(template, "").strip())


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
    successors: dict[str, str] = field(default_factory=dict)  # old id -> the id it became (one step)

    def first_seen(self, ident: str) -> str:
        return self.appearances[ident][0].release


@dataclass(frozen=True)
class Raised:
    """One id as one release raises it: what following it to the next release reads. A release
    known only by its shipped wordings (kb/releases/wording.py) has no guard (None) and one line."""

    id: str
    file: str
    qualname: str
    template: str
    lines: tuple[int, ...]
    parts: tuple[str, ...] = ()  # the templates of the messages a joined list is built from
    guard: Optional[str] = None

    @property
    def line(self) -> int:
        return self.lines[0]


def raised_of(scan: ScanResult) -> dict[str, Raised]:
    """Every id of a scan, as the diff reads it: its first site's place, function and guard, the
    lines of all its sites, the parts of all of them."""
    sites: dict[str, list[int]] = {}
    parts: dict[str, list[str]] = {}
    first: dict[str, RaiseSite] = {}
    for s in scan.sites:
        first.setdefault(s.id, s)
        sites.setdefault(s.id, []).append(s.line)
        parts.setdefault(s.id, []).extend(s.fact.parts)
    return {i: Raised(i, s.file, s.fact.qualname, s.template, tuple(sites[i]), tuple(dict.fromkeys(parts[i])),
                      s.fact.guard) for i, s in first.items()}


def diff_scans(old: ScanResult, new: ScanResult, old_name: str, new_name: str) -> ReleaseDiff:
    return diff_raised(raised_of(old), raised_of(new), old_name, new_name)


def diff_raised(a: Mapping[str, Raised], b: Mapping[str, Raised], old_name: str, new_name: str) -> ReleaseDiff:
    """What became of every id of release `a` in release `b`: kept (its guard or lines maybe
    changed), edited, moved, or removed; and the ids `b` added."""
    changes: list[Change] = []
    for ident in sorted(set(a) & set(b)):
        if a[ident].guard is None:  # a release known by its wordings: its guards are not known
            continue
        if a[ident].guard != b[ident].guard:
            changes.append(Change("guard", ident, ident, f"{a[ident].guard} -> {b[ident].guard}"))
        elif a[ident].lines != b[ident].lines:
            changes.append(Change("line", ident, ident, f"{a[ident].line} -> {b[ident].line}"))
    gone = sorted(set(a) - set(b))
    fresh = sorted(set(b) - set(a))
    # moved: the same message (placeholders aside) in another file, or in the same file under
    # another function; the function's name and the file's path pair several copies of one message
    taken: set[str] = set()
    matched: set[str] = set()
    for old_id, new_id in _pair_moves(a, b, gone, fresh):
        taken.add(new_id)
        matched.add(old_id)
        if a[old_id].file == b[new_id].file:  # placeholders renamed or the function renamed
            changes.append(Change("edited", old_id, new_id, "the same message"))
        else:
            changes.append(Change("moved", old_id, new_id, f"{a[old_id].file} -> {b[new_id].file}"))
    # edited: same file and function, a similar message (best pairs first)
    pairs: list[tuple[float, str, str]] = []
    by_place: dict[tuple[str, str], list[str]] = {}
    for ident in fresh:
        if ident not in taken:
            by_place.setdefault((b[ident].file, b[ident].qualname), []).append(ident)
    for ident in gone:
        if ident in matched:
            continue
        place = (a[ident].file, a[ident].qualname)
        for cand in by_place.get(place, []):
            m = difflib.SequenceMatcher(None, a[ident].template, b[cand].template, autojunk=False)
            if m.real_quick_ratio() > EDIT_RATIO and m.quick_ratio() > EDIT_RATIO:
                ratio = m.ratio()
                if ratio > EDIT_RATIO:
                    pairs.append((ratio, ident, cand))
    pairs += _renamed_edits(a, b, [i for i in gone if i not in matched], [i for i in fresh if i not in taken])
    pairs += _extensions(a, b, [i for i in gone if i not in matched], [i for i in fresh if i not in taken])
    generalized = _generalized(a, b, [i for i in gone if i not in matched], [i for i in fresh if i not in taken])
    for ratio, ident, cand in sorted(pairs + generalized, key=lambda p: (-p[0], p[1], p[2])):
        if ident in matched or cand in taken:
            continue
        matched.add(ident)
        taken.add(cand)
        detail = "words became a placeholder" if (ratio, ident, cand) in generalized else f"similarity {ratio:.2f}"
        changes.append(Change("edited", ident, cand, detail))
    changes += [Change("removed", i, None) for i in gone if i not in matched]
    changes += [Change("added", None, i) for i in fresh if i not in taken]
    order = {"added": 0, "removed": 1, "edited": 2, "moved": 3, "guard": 4, "line": 5}
    changes.sort(key=lambda c: (order[c.kind], c.old or "", c.new or ""))
    return ReleaseDiff(old_name, new_name, tuple(changes))


def skeleton(template: str) -> str:
    """The message with every placeholder blank: `{lora.rank}` and `{lora_rank}` are one message."""
    return sub_placeholders(template, "{}")


def _leaf(qualname: str) -> str:
    return qualname.rsplit(".", 1)[-1]


def _owner(qualname: str) -> str:
    return qualname.rsplit(".", 1)[0] if "." in qualname else ""


def _closeness(old: Raised, new: Raised) -> float:
    """How alike two raise sites of one message are by where they are: the same function name
    first, then the same class, then the most similar file path."""
    same_leaf = _leaf(old.qualname) == _leaf(new.qualname)
    same_owner = _owner(old.qualname) == _owner(new.qualname)
    path = difflib.SequenceMatcher(None, old.file, new.file, autojunk=False).ratio()
    return 4 * same_leaf + 2 * same_owner + path


def _pair_moves(a: Mapping[str, Raised], b: Mapping[str, Raised], gone: list[str],
                fresh: list[str]) -> list[tuple[str, str]]:
    """Gone ids whose message reappears under a new id (as its template, or as a part it is
    built from): grouped by skeleton, each group paired closest first (one gone id to one new id). A message with fewer than MOVE_LITERAL literal
    characters is followed only within its function."""
    olds: dict[str, list[str]] = {}
    for ident in gone:
        olds.setdefault(skeleton(a[ident].template), []).append(ident)
    news: dict[str, list[str]] = {}
    for ident in fresh:  # by its template, and by each part its message is built from (a list joined)
        for key in dict.fromkeys([skeleton(b[ident].template), *(skeleton(p) for p in b[ident].parts)]):
            news.setdefault(key, []).append(ident)
    out: list[tuple[str, str]] = []
    for key in sorted(set(olds) & set(news)):
        short = _literal(key) < MOVE_LITERAL
        scored = []
        for o in olds[key]:
            for n in news[key]:
                if short and a[o].qualname != b[n].qualname:
                    continue
                scored.append((_closeness(a[o], b[n]), o, n))
        used_old: set[str] = set()
        used_new: set[str] = set()
        for _, o, n in sorted(scored, key=lambda t: (-t[0], t[1], t[2])):
            if o not in used_old and n not in used_new:
                used_old.add(o)
                used_new.add(n)
                out.append((o, n))
    return out


def _renamed_edits(a: Mapping[str, Raised], b: Mapping[str, Raised], gone: list[str],
                   fresh: list[str]) -> list[tuple[float, str, str]]:
    """A message edited a little while its function was renamed in the same file
    (`check_enough_kv_cache_memory` -> `_check_enough_kv_cache_memory`): a stricter similarity."""
    by_file: dict[str, list[str]] = {}
    for ident in fresh:
        by_file.setdefault(b[ident].file, []).append(ident)
    out: list[tuple[float, str, str]] = []
    for ident in gone:
        s = a[ident]
        for cand in by_file.get(s.file, []):
            if b[cand].qualname == s.qualname:
                continue  # same function: the ordinary edit above
            m = difflib.SequenceMatcher(None, s.template, b[cand].template, autojunk=False)
            if m.real_quick_ratio() > RENAMED_EDIT_RATIO and m.quick_ratio() > RENAMED_EDIT_RATIO:
                ratio = m.ratio()
                if ratio > RENAMED_EDIT_RATIO:
                    out.append((ratio, ident, cand))
    return out


def _extensions(a: Mapping[str, Raised], b: Mapping[str, Raised], gone: list[str],
                fresh: list[str]) -> list[tuple[float, str, str]]:
    """A message that grew (`Failed to infer device type` -> `Failed to infer device type,
    please set ...`) in the same file and class, its function possibly renamed: an edit whose
    similarity ratio is low only because text was added."""
    by_file: dict[tuple[str, str], list[str]] = {}
    for ident in fresh:
        s = b[ident]
        by_file.setdefault((s.file, _owner(s.qualname)), []).append(ident)
    out: list[tuple[float, str, str]] = []
    for ident in gone:
        s = a[ident]
        old = skeleton(s.template).rstrip(". ")
        if _literal(old) < MOVE_LITERAL:
            continue
        for cand in by_file.get((s.file, _owner(s.qualname)), []):
            new = skeleton(b[cand].template)
            if new.startswith(old) and len(new) > len(old):
                out.append((EDIT_RATIO + len(old) / len(new) * (1 - EDIT_RATIO) / 2, ident, cand))
    return out


def reads(template: str, text: str) -> bool:
    """Whether the template, each placeholder any text of at least one character, reads the
    whole of `text`: its first and last literal parts at the ends, the others found leftmost in
    order (a glob's greedy match, linear in the text: no pattern to backtrack)."""
    parts, _ = template_parts(template)
    if len(parts) == 1:
        return parts[0] == text
    head, *middle, tail = parts
    if not text.startswith(head) or not text.endswith(tail) or len(text) < len(head) + len(tail) + len(middle) + 1:
        return False
    at, end = len(head) + 1, len(text) - len(tail) - 1  # each placeholder takes one character at least
    for part in middle:
        found = text.find(part, at, end)
        if found < 0:
            return False
        at = found + len(part) + 1
    return at <= end + 1


def _generalized(a: Mapping[str, Raised], b: Mapping[str, Raised], gone: list[str],
                 fresh: list[str]) -> list[tuple[float, str, str]]:
    """A message in the same file and class whose words became a placeholder, or the reverse:
    vLLM 0.34.0's "No available memory for the cache blocks. {hint} See ..." is 0.33.0's message
    with its advice made a value. One template, as a pattern, reads the other's whole text; each
    keeps at least MOVE_LITERAL literal characters, so that no generic template takes any message."""
    by_file: dict[tuple[str, str], list[str]] = {}
    for ident in fresh:
        s = b[ident]
        if _literal(s.template) >= MOVE_LITERAL:
            by_file.setdefault((s.file, _owner(s.qualname)), []).append(ident)
    out: list[tuple[float, str, str]] = []
    for ident in gone:
        s = a[ident]
        if _literal(s.template) < MOVE_LITERAL:
            continue
        for cand in by_file.get((s.file, _owner(s.qualname)), []):
            new = b[cand].template
            if reads(new, s.template) or reads(s.template, new):
                ratio = difflib.SequenceMatcher(None, s.template, new, autojunk=False).ratio()
                out.append((EDIT_RATIO * (1 + ratio) / 2, ident, cand))
    return out


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
        for ident, r in sorted(raised_of(scan).items()):
            appearances.setdefault(current(ident), []).append(
                Appearance(name, ident, r.file, r.lines, r.template, r.guard or ""))
    aliases = {old: (current(old), kind, release) for old, (_, kind, release) in successor.items()}
    removed = {}
    for ident, release in removed_at.items():
        cur = current(ident)
        if cur not in present[names[-1]]:
            removed[cur] = release
    return History(names, {k: tuple(v) for k, v in appearances.items()}, aliases, removed, tuple(diffs), present,
                   {old: new for old, (new, _, _) in successor.items()})
