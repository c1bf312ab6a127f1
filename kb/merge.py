"""(scan, curated entries) -> records, one per error id, plus the problems found on the way:
orphans (an entry whose id vLLM no longer raises), stale entries (the message or the guard
changed since the entry was verified) and related ids that do not exist. Nothing is silently
dropped: every entry either lands on its record or is reported."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace
from typing import Optional, Sequence

from kb.entries import Entry
from kb.model import Record, ScanResult, Site
from kb.present import related_ids, slug_base, subsystem_of, title_of, unique_slugs


@dataclass(frozen=True)
class Problem:
    """A located finding of the merge: reported by `kb lint`."""

    path: str
    line: int
    message: str
    kind: str  # orphan, stale, related

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass(frozen=True)
class Merged:
    records: tuple[Record, ...]
    problems: tuple[Problem, ...]


def group_sites(sites: Sequence[Site]) -> dict[str, list[Site]]:
    by_id: dict[str, list[Site]] = {}
    for s in sites:
        by_id.setdefault(s.id, []).append(s)
    return by_id


def build_records(scan: ScanResult) -> list[Record]:
    """Records sorted by (file, first line, id), without curated entries."""
    by_id = group_sites(scan.sites)
    slugs = unique_slugs([(i, slug_base(s[0].template, s[0]), s[0].file) for i, s in sorted(by_id.items())])
    related = related_ids(by_id)
    records = [
        Record(
            id=ident,
            slug=slugs[ident],
            title=title_of(sites[0].template, sites[0]),
            template=sites[0].template,
            exception_class=sites[0].exception_class,
            sites=tuple(sites),
            subsystem=subsystem_of(sites[0].file),
            related=related[ident],
        )
        for ident, sites in by_id.items()
    ]
    return sorted(records, key=lambda r: (r.file, r.line, r.id))


def merge(scan: ScanResult, entries: Sequence[Entry]) -> Merged:
    records = build_records(scan)
    by_id = {r.id: r for r in records}
    release = scan.tree.release or scan.tree.ref
    problems: list[Problem] = []
    for e in entries:
        record = by_id.get(e.id)
        if record is None:
            problems.append(Problem(e.path, e.line_of("id"), _orphan_message(e, records, release), "orphan"))
            continue
        stale = _stale_reasons(e, record, release)
        for why in stale:
            problems.append(Problem(e.path, e.line_of("message" if why.startswith("message") else "verified"),
                                    f"stale: {why}", "stale"))
        for i, other in enumerate(e.related):
            if other not in by_id:
                problems.append(Problem(e.path, e.line_of("related", i), f"related id {other} is not raised in {release}",
                                        "related"))
        related = tuple(dict.fromkeys([o for o in e.related if o in by_id and o != e.id] + list(record.related)))
        by_id[e.id] = replace(record, entry=e, stale=tuple(stale), related=related[: max(10, len(e.related))])
    merged = tuple(by_id[r.id] for r in records)
    return Merged(merged, tuple(problems))


def _stale_reasons(e: Entry, record: Record, release: str) -> list[str]:
    out = []
    if e.message is not None and e.message != record.template:
        out.append(f"message changed in {release}: the entry was written for {e.message!r}, "
                   f"vLLM now raises {record.template!r}")
    if e.verified is not None:
        guards = [s.fact.guard for s in record.sites]
        if e.verified.guard not in guards:
            out.append(f"guard changed since {e.verified.release}: verified against `{e.verified.guard}`, "
                       f"vLLM {release} has `{guards[0]}`")
    return out


def _orphan_message(e: Entry, records: Sequence[Record], release: str) -> str:
    text = f"orphan: id {e.id} is not raised in {release}"
    nearest = nearest_record(e, records)
    if nearest is not None:
        text += f"; nearest scanned template{' in ' + e.file if e.file else ''}: {nearest.id} {nearest.template!r}"
    return text


def nearest_record(e: Entry, records: Sequence[Record]) -> Optional[Record]:
    """The scanned template most like the entry's message, in the entry's file when known."""
    if not e.message:
        return None
    pool = [r for r in records if r.file == e.file] if e.file else list(records)
    if not pool:
        pool = list(records)
    best, score = None, 0.0
    for r in pool:
        m = difflib.SequenceMatcher(None, e.message, r.template, autojunk=False)
        if m.real_quick_ratio() <= score or m.quick_ratio() <= score:
            continue
        ratio = m.ratio()
        if ratio > score:
            best, score = r, ratio
    return best if score >= 0.5 else None
