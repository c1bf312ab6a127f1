"""Where every id of every release leads in the release being built: what a one-release build
knows of the others. From the wordings that ship with kb (kb/releases/wording.py), and, for a
release newer than they are, from the diff of their newest release to it (kb/releases/history.py's
rules, on the shipped wordings: no older wheel is downloaded).

A curated entry or a public report written for any id of an error lands on the id the built
release raises for it; one whose error the history knows as removed, or as not raised yet, is
said so, never taken for an orphan."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional

from kb.model import ScanResult, Wording
from kb.releases.history import ReleaseDiff, diff_raised, raised_of
from kb.releases.wording import chains, extend, load, raised_in


@dataclass(frozen=True)
class Gone:
    """An error the built release no longer raises."""

    last: str  # the last release that raised it
    since: str  # the first release without it
    template: str
    file: str


@dataclass(frozen=True)
class Lineage:
    release: Optional[str]
    # every id of every release up to this one, with its current id in this release: the lookup's older wordings
    wordings: tuple[Wording, ...] = ()
    aliases: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # old id -> (id raised now, kind, release)
    removed: dict[str, Gone] = field(default_factory=dict)  # any id of an error no longer raised
    newer: dict[str, str] = field(default_factory=dict)  # id first raised after this release -> that release
    diff: Optional[ReleaseDiff] = None  # from the newest shipped release, for a release newer than all of them
    shipped: tuple[str, ...] = ()  # the releases the shipped wordings describe

    @property
    def known(self) -> bool:
        return bool(self.shipped)


_VERSION = re.compile(r"^(\d+(?:\.\d+)*)(?:\.?(a|b|rc)(\d+))?(?:\.?post(\d+))?(?:\.?dev(\d+))?")


def release_key(name: str) -> Optional[tuple[int, ...]]:
    """A release name in version order (0.9.2 < 0.10.0 < 0.34.0rc1 < 0.34.0 < 0.34.0.post1); None
    for a name that is not a version (a git ref)."""
    m = _VERSION.match(name)
    if m is None:
        return None
    nums = [int(x) for x in m.group(1).split(".")][:4]
    nums += [0] * (4 - len(nums))
    pre = (-1, int(m.group(3))) if m.group(2) else ((-2, int(m.group(5))) if m.group(5) else (0, 0))
    post = int(m.group(4)) if m.group(4) else -1
    return (*nums, *pre, post)


def lineage(scan: ScanResult, shipped: Optional[tuple[tuple[str, ...], tuple[Wording, ...]]] = None) -> Lineage:
    """What the shipped wordings say of the built release's ids and of every older one."""
    releases, items = shipped if shipped is not None else load()
    release = scan.tree.release
    if not releases or not release:
        return Lineage(release)
    if release == releases[-1]:
        return _of(release, items, releases)
    if release in releases:
        return _back(release, items, releases)
    key, newest = release_key(release), release_key(releases[-1])
    if key is None or newest is None or key < newest:
        return Lineage(release, shipped=releases)  # a release between the shipped ones: not followed
    diff = diff_raised(raised_in(items, releases[-1]), raised_of(scan), releases[-1], release)
    grown = extend(items, releases, diff, scan)
    return replace_diff(_of(release, grown, (*releases, release)), diff)


def replace_diff(lin: Lineage, diff: ReleaseDiff) -> Lineage:
    return Lineage(lin.release, lin.wordings, lin.aliases, lin.removed, lin.newer, diff, lin.shipped[:-1])


def _of(release: str, items: tuple[Wording, ...], releases: tuple[str, ...]) -> Lineage:
    """The newest release of the wordings: each older id leads to its current one."""
    by_id = {w.id: w for w in items}
    aliases: dict[str, tuple[str, str, str]] = {}
    removed: dict[str, Gone] = {}
    for w in items:
        if w.current and w.current != w.id:
            now = by_id.get(w.current)
            kind = "edited" if now is not None and now.file == w.file else "moved"
            aliases[w.id] = (w.current, kind, w.ended_in or release)
        elif w.current is None:
            tail = by_id.get(w.chain, w)
            removed[w.id] = Gone(tail.last, tail.ended_in or w.ended_in or release, tail.template, tail.file)
    return Lineage(release, items, aliases, removed, {}, None, releases)


def _back(release: str, items: tuple[Wording, ...], releases: tuple[str, ...]) -> Lineage:
    """An older shipped release: each id of an error leads to the id this release raises for it;
    ids of errors this release does not raise yet are `newer`. (The lookup's older wordings are
    those of the newest release only: none here, as before.)"""
    order = {r: i for i, r in enumerate(releases)}
    at = order[release]
    aliases: dict[str, tuple[str, str, str]] = {}
    removed: dict[str, Gone] = {}
    newer: dict[str, str] = {}
    for chain in chains(items).values():
        here = [w for w in chain if order.get(w.first, -1) <= at <= order.get(w.last, -1)]
        earlier = [w for w in chain if order.get(w.last, -1) < at]
        for w in chain:
            if w in here:
                continue
            if here:
                target = here[0]
                kind = "edited" if target.file == w.file else "moved"
                aliases[w.id] = (target.id, "newer" if order.get(w.first, -1) > at else kind,
                                 w.first if order.get(w.first, -1) > at else (w.ended_in or release))
            elif order.get(w.first, -1) > at:
                newer[w.id] = w.first
            elif earlier:
                tail = max(earlier, key=lambda x: order.get(x.last, -1))
                removed[w.id] = Gone(tail.last, tail.ended_in or release, tail.template, tail.file)
    return Lineage(release, (), aliases, removed, newer, None, releases)


def followed(lin: Lineage, ident: str, raised: Mapping[str, object]) -> Optional[str]:
    """The id this release raises for `ident`'s error, if any."""
    if ident in raised:
        return ident
    if ident in lin.aliases:
        target = lin.aliases[ident][0]
        return target if target in raised else None
    return None
