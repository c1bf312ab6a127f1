"""(scan, curated entries) -> records, one per error id, plus the problems found on the way:
orphans (an entry whose id vLLM no longer raises), stale entries (the message or the guard
changed since the entry was verified) and related ids that do not exist. Nothing is silently
dropped: every entry either lands on its record or is reported."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Optional

from kb.checks.verify import verify_records
from kb.config.resolve import SetByReader
from kb.model import Entry, Merged, Problem, RaiseSite, Record, Report, ScanResult, Wording
from kb.records.present import (
    related_ids,
    slug_base,
    subsystem_of,
    title_of,
    unique_slugs,
    without_text,
)
from kb.records.reports import attach_reports
from kb.setby import SetBy

if TYPE_CHECKING:
    from kb.configmodel import ConfigModel
    from kb.releases.history import History
    from kb.releases.lineage import Lineage


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
          reports: Sequence[Report] = (), wordings: Sequence[Wording] = (),
          lineage: Optional[Lineage] = None) -> Merged:
    """Attach each entry and each public report (its quote checked against the template or one
    of `wordings`, the older ones) to its record and verify the entry's check.
    An entry written for an id that became an alias (a release history's, or `lineage`'s: what
    the shipped wordings say of a one-release build) follows to the current id. It is marked
    stale until re-verified where its message changed, or its guard changed and its check does
    not agree with the new one. `nearest`: name the nearest scanned template of an orphan or a
    removed error (costly over a whole release; only worth it when the problems are shown)."""
    records = list(records) if records is not None else build_records(scan)
    aliases = {**(lineage.aliases if lineage is not None else {}), **(aliases or {})}
    by_id = {r.id: r for r in records}
    release = scan.tree.release or scan.tree.ref
    problems: list[Problem] = []
    guard_changed: dict[str, Problem] = {}  # record id -> the notice, dropped when its check agrees
    for e in entries:
        target, followed = e.id, None
        if target not in by_id and target in aliases:
            target, kind, since = aliases[target]
            followed = _followed(e.id, target, kind, since, release)
        record = by_id.get(target)
        if record is None:
            problems.append(_unraised(e, records, release, lineage, nearest))
            continue
        if record.entry is not None:
            problems.append(Problem(e.path, e.line_of("id"), f"{target} is curated twice: also in {record.entry.path}",
                                    "orphan"))
            continue
        message_stale, guard_stale = _stale_reasons(e, record, release)
        stale = ([followed] if followed and (e.message is None or message_stale) else []) + message_stale
        if record.removed_since:
            stale.append(f"no longer raised since {record.removed_since}")
        for why in stale:
            problems.append(Problem(e.path, e.line_of("message" if why.startswith("message") else "verified"),
                                    f"stale: {why}", "stale"))
        if guard_stale:
            guard_changed[target] = Problem(e.path, e.line_of("verified"), f"stale: {guard_stale}", "stale")
            stale.append(guard_stale)
        mine = []  # the related ids as this release raises them (an older id follows its error)
        for i, other in enumerate(e.related):
            now = other if other in by_id else (aliases[other][0] if other in aliases else None)
            if now is None or now not in by_id:
                gone = lineage.removed.get(other) if lineage is not None else None
                why = f"removed in {gone.since}" if gone is not None else f"not raised in {release}"
                problems.append(Problem(e.path, e.line_of("related", i), f"related id {other} is {why}",
                                        "related" if gone is None else "related-removed"))
            else:
                mine.append(now)
        related = tuple(dict.fromkeys([o for o in mine if o != target] + list(record.related)))
        by_id[target] = replace(record, entry=e, stale=tuple(stale), related=related[: max(10, len(e.related))])
    # an uncurated error links its nearest RELATED_UNCURATED: thousands of pages and records carry them
    with_reports, found = attach_reports([by_id[r.id] for r in records], reports, release, aliases, wordings,
                                         lineage.removed if lineage is not None else {})
    problems += found
    merged = tuple(m if m.entry is not None else replace(m, related=m.related[:RELATED_UNCURATED])
                   for m in with_reports)
    verified = verify_records(merged, scan.config)
    merged = tuple(replace(r, checked=True) if verified.get(r.id) == [] else r for r in merged)
    # a changed guard: re-verify, unless the entry's check, its cases and example fix agree with the new one
    agreed = {rid for rid in guard_changed if verified.get(rid) == [] and _has_check(by_id[rid])}
    for rid, p in guard_changed.items():
        problems.append(replace(p, kind="carried", message=p.message.replace(
            "stale: ", "carried: ", 1) + "; its check agrees with the new guard: update `verified:`") if rid in agreed else p)
    merged = tuple(replace(r, stale=tuple(w for w in r.stale if not w.startswith("guard changed")))
                   if r.id in agreed else r for r in merged)
    return Merged(merged, tuple(problems), tuple(p for found in verified.values() for p in found))


def _has_check(r: Record) -> bool:
    return r.entry is not None and r.entry.check is not None


def _followed(old: str, new: str, kind: str, since: str, release: str) -> str:
    if kind == "newer":
        return f"written for {old}, vLLM {since}'s wording of this error: re-verify it for {new} in {release}"
    if kind == "edited":
        return f"written for {old}, whose message was edited in {since}: re-verify it for {new}"
    return f"written for {old}, which moved to another file in {since}: re-verify it"


def _unraised(e: Entry, records: Sequence[Record], release: str, lineage: Optional[Lineage], nearest: bool) -> Problem:
    """Why an entry lands on no record: its error was removed, is newer than the release, or is
    unknown (an orphan)."""
    where = e.line_of("id")
    gone = lineage.removed.get(e.id) if lineage is not None else None
    if gone is not None:
        found = nearest_records(e.message or gone.template, e.file or gone.file, records) if nearest else []
        text = (f"removed: vLLM {gone.since} no longer raises {e.id} (last raised by {gone.last}); "
                "its page stays in the builds of the releases that raise it")
        if found:
            text += "; nearest candidates: " + ", ".join(f"{r.id} {r.template[:100]!r}" for r in found)
        return Problem(e.path, where, text, "removed", tuple(r.id for r in found))
    first = lineage.newer.get(e.id) if lineage is not None else None
    if first is not None:
        return Problem(e.path, where, f"newer: {e.id} is first raised in vLLM {first}, after {release}", "newer")
    message = _orphan_message(e, records, release) if nearest else f"orphan: id {e.id} is not raised in {release}"
    return Problem(e.path, where, message, "orphan")


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


def _stale_reasons(e: Entry, record: Record, release: str) -> tuple[list[str], Optional[str]]:
    """(why the message is not the one the entry was written for; why the guard is not the one it
    was verified against, or None)."""
    out = []
    if e.message is not None and e.message != record.template:
        out.append(f"message changed in {release}: the entry was written for {e.message!r}, "
                   f"vLLM now raises {record.template!r}")
    guard = None
    if e.verified is not None:
        guards = [s.fact.guard for s in record.sites]
        if e.verified.guard not in guards:
            guard = (f"guard changed since {e.verified.release}: verified against `{e.verified.guard}`, "
                     f"vLLM {release} has `{guards[0]}`")
    return out, guard


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
    found = nearest_records(e.message, e.file, records, 1)
    return found[0] if found else None


def nearest_records(message: str, file: Optional[str], records: Sequence[Record], limit: int = 3,
                    floor: float = 0.5) -> list[Record]:
    """The scanned templates most like `message` (at least `floor` alike), best first: those in
    `file` when it has any, else all."""
    pool = [r for r in records if r.file == file and r.removed_since is None] if file else []
    if not pool:
        pool = [r for r in records if r.removed_since is None]
    scored: list[tuple[float, str, Record]] = []
    for r in pool:
        least = scored[limit - 1][0] if len(scored) >= limit else floor
        m = difflib.SequenceMatcher(None, message, r.template, autojunk=False)
        if m.real_quick_ratio() < least or m.quick_ratio() < least:
            continue
        ratio = m.ratio()
        if ratio >= least:
            scored.append((ratio, r.id, r))
            scored.sort(key=lambda t: (-t[0], t[1]))
            del scored[limit:]
    return [r for _, _, r in scored]
