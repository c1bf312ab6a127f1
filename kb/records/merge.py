"""(scan, curated entries) -> records, one per error id, plus the problems found on the way:
orphans (an entry whose id vLLM no longer raises), stale entries (the message or the guard
changed since the entry was verified) and related ids that do not exist. Nothing is silently
dropped: every entry either lands on its record or is reported."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Optional

from kb.checks.verify import verify_records
from kb.config.resolve import SetBy, SetByReader
from kb.model import Entry, Located, RaiseSite, Record, Report, ScanResult, Wording
from kb.records.present import (
    related_ids,
    slug_base,
    subsystem_of,
    title_of,
    unique_slugs,
    without_text,
)

if TYPE_CHECKING:
    from kb.config.model import ConfigModel
    from kb.releases.history import History


@dataclass(frozen=True)
class Problem:
    """A located finding of the merge: reported by `kb lint`."""

    path: str
    line: int
    message: str
    kind: str  # orphan, stale, related, report

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass(frozen=True)
class Merged:
    records: tuple[Record, ...]  # `checked` set where the entry's check and example fix pass
    problems: tuple[Problem, ...]
    verification: tuple[Located, ...] = ()  # why the other checks did not pass


def group_sites(sites: Sequence[RaiseSite]) -> dict[str, list[RaiseSite]]:
    by_id: dict[str, list[RaiseSite]] = {}
    for s in sites:
        by_id.setdefault(s.id, []).append(s)
    return by_id


def record_title(sites: Sequence[RaiseSite]) -> str:
    """The title of an error: its message's first sentence; for a message joined at run time
    (`{' '.join(errors)}`), the first of the messages it is built from, and how many others."""
    s = sites[0]
    title = title_of(s.template, s.exception_class, s.fact.qualname)
    parts = list(dict.fromkeys(p for site in sites for p in site.fact.parts))
    if parts and without_text(s.template):
        first = title_of(parts[0], s.exception_class, s.fact.qualname)
        more = len(parts) - 1
        return first + (f" (or {more} other message{'s' if more > 1 else ''})" if more else "")
    return title


RELATED_UNCURATED = 6


def build_records(scan: ScanResult) -> list[Record]:
    """Records sorted by (file, first line, id), without curated entries."""
    by_id = group_sites(scan.sites)
    slugs = unique_slugs([(i, slug_base(s[0].template, s[0]), s[0].file) for i, s in sorted(by_id.items())])
    related = related_ids(by_id)
    records = [
        Record(
            id=ident,
            slug=slugs[ident],
            title=record_title(sites),
            template=sites[0].template,
            exception_class=sites[0].exception_class,
            sites=tuple(sites),
            subsystem=subsystem_of(sites[0].file),
            related=related[ident],
        )
        for ident, sites in by_id.items()
    ]
    return sorted(records, key=lambda r: (r.file, r.line, r.id))


PARALLEL_SET_BY = 1000  # records from which worker processes share the work


def attach_set_by(records: Sequence[Record], config: Optional[ConfigModel], jobs: int = 1,
                  min_parallel: int = PARALLEL_SET_BY) -> list[Record]:
    """Records with what sets each (kb.config.resolve) against the release's flag model: only
    the pages need it, so only the site build and the MkDocs plugin pay for it. The earlier
    checks of an error are looked for among the sites of its file in the same release. With
    `jobs` > 1 and many records, worker processes resolve the files' records, the same way."""
    by_file: dict[tuple[Optional[str], str], list[RaiseSite]] = {}
    for r in records:
        by_file.setdefault((r.ref, r.file), []).extend(r.sites)
    for sites in by_file.values():
        sites.sort(key=lambda s: (s.line, s.id))
    todo = [(i, r) for i, r in enumerate(records) if r.setby is None]
    items = [(r.sites, by_file[(r.ref, r.file)]) for _, r in todo]
    if jobs > 1 and len(items) >= min_parallel:
        from kb.workers import worker_pool

        chunks = _file_chunks(todo, jobs * 4)
        with worker_pool(jobs) as pool:
            done = list(pool.map(_set_by_chunk, [config] * len(chunks), [[items[k] for k in c] for c in chunks]))
        found: dict[int, SetBy] = {}
        for chunk, results in zip(chunks, done):
            found.update(zip(chunk, results))
    else:
        found = dict(enumerate(_set_by_chunk(config, items)))
    out = list(records)
    for k, (i, r) in enumerate(todo):
        out[i] = replace(r, setby=found[k])
    return out


def _set_by_chunk(config: Optional[ConfigModel],
                  items: Sequence[tuple[tuple[RaiseSite, ...], list[RaiseSite]]]) -> list[SetBy]:
    reader = SetByReader(config)
    return [reader.set_by(sites, siblings) for sites, siblings in items]


def _file_chunks(todo: Sequence[tuple[int, Record]], count: int) -> list[list[int]]:
    """Positions in `todo`, about `count` chunks of similar site counts, a file never split."""
    files: dict[tuple[Optional[str], str], list[int]] = {}
    for k, (_, r) in enumerate(todo):
        files.setdefault((r.ref, r.file), []).append(k)
    groups = sorted(files.values(), key=lambda g: (-sum(len(todo[k][1].sites) for k in g), g[0]))
    chunks: list[list[int]] = [[] for _ in range(min(count, len(groups)))]
    sizes = [0] * len(chunks)
    for g in groups:
        i = sizes.index(min(sizes))
        chunks[i] += g
        sizes[i] += sum(len(todo[k][1].sites) for k in g)
    return [c for c in chunks if c]


def merge(scan: ScanResult, entries: Sequence[Entry], records: Optional[Sequence[Record]] = None,
          aliases: Optional[Mapping[str, tuple[str, str, str]]] = None, nearest: bool = True,
          reports: Sequence[Report] = (), wordings: Sequence[Wording] = ()) -> Merged:
    """Attach each entry and each public report (its quote checked against the template or one
    of `wordings`, the older ones) to its record and verify the entry's check.
    With a release history, an entry written for an id that became an alias follows to the
    current id, marked stale until re-verified. `nearest`: name the nearest scanned template of
    an orphan (costly over a whole release; only worth it when the problems are shown)."""
    from kb.records.reports import attach_reports  # it reads Problem from here

    records = list(records) if records is not None else build_records(scan)
    aliases = aliases or {}
    by_id = {r.id: r for r in records}
    release = scan.tree.release or scan.tree.ref
    problems: list[Problem] = []
    for e in entries:
        target, followed = e.id, None
        if target not in by_id and target in aliases:
            target, kind, since = aliases[target]
            followed = f"written for {e.id}, whose message was {kind} in {since}: re-verify it for {target}" \
                if kind == "edited" else f"written for {e.id}, which moved to another file in {since}: re-verify it"
        record = by_id.get(target)
        if record is None:
            message = _orphan_message(e, records, release) if nearest else f"orphan: id {e.id} is not raised in {release}"
            problems.append(Problem(e.path, e.line_of("id"), message, "orphan"))
            continue
        if record.entry is not None:
            problems.append(Problem(e.path, e.line_of("id"), f"{target} is curated twice: also in {record.entry.path}",
                                    "orphan"))
            continue
        stale = ([followed] if followed else []) + _stale_reasons(e, record, release)
        if record.removed_since:
            stale.append(f"no longer raised since {record.removed_since}")
        for why in stale:
            problems.append(Problem(e.path, e.line_of("message" if why.startswith("message") else "verified"),
                                    f"stale: {why}", "stale"))
        for i, other in enumerate(e.related):
            if other not in by_id:
                problems.append(Problem(e.path, e.line_of("related", i), f"related id {other} is not raised in {release}",
                                        "related"))
        related = tuple(dict.fromkeys([o for o in e.related if o in by_id and o != target] + list(record.related)))
        by_id[target] = replace(record, entry=e, stale=tuple(stale), related=related[: max(10, len(e.related))])
    # an uncurated error links its nearest RELATED_UNCURATED: thousands of pages and records carry them
    with_reports, found = attach_reports([by_id[r.id] for r in records], reports, release, aliases, wordings)
    problems += found
    merged = tuple(m if m.entry is not None else replace(m, related=m.related[:RELATED_UNCURATED])
                   for m in with_reports)
    verified = verify_records(merged, scan.config)
    merged = tuple(replace(r, checked=True) if verified.get(r.id) == [] else r for r in merged)
    return Merged(merged, tuple(problems), tuple(p for found in verified.values() for p in found))


def history_records(scans: Sequence[tuple[str, ScanResult]], history: History) -> list[Record]:
    """The newest release's records plus the pages of removed errors (as their last release had
    them), each with its history and the older ids that lead to it."""
    newest = build_records(scans[-1][1])
    by_name = dict(scans)
    wanted: dict[str, list[str]] = {}
    for ident in sorted(history.removed):
        wanted.setdefault(history.appearances[ident][-1].release, []).append(ident)
    removed: list[Record] = []
    pages = {r.id for r in newest} | set(history.removed)
    slugs = {r.slug for r in newest}
    for release, ids in wanted.items():
        old = {r.id: r for r in build_records(by_name[release])}
        for i in ids:
            slug = old[i].slug if old[i].slug not in slugs else f"{old[i].slug}-{i[:6]}"
            slugs.add(slug)
            removed.append(replace(old[i], slug=slug, removed_since=history.removed[i], ref=by_name[release].tree.ref,
                                   related=tuple(x for x in old[i].related if x in pages)))
    aliases: dict[str, list[str]] = {}
    for old_id, (current, _, _) in history.aliases.items():
        aliases.setdefault(current, []).append(old_id)
    out = [replace(r, history=history.appearances.get(r.id, ()), aliases=tuple(sorted(aliases.get(r.id, []))))
           for r in newest + removed]
    return sorted(out, key=lambda r: (r.removed_since is not None, r.file, r.line, r.id))


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
