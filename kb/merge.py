"""(scan, curated entries) -> records, one per error id, plus the problems found on the way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from kb.model import Record, ScanResult, Site
from kb.present import related_ids, slug_base, subsystem_of, title_of, unique_slugs


@dataclass(frozen=True)
class Problem:
    """A located finding of the merge (orphan or stale entry): reported by `kb lint`."""

    path: str
    line: int
    message: str
    kind: str  # orphan, stale

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


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
