"""Whole jobs, as the CLI and the MkDocs plugin run them: source -> scan -> merge -> output.

Each job is one function; the CLI parses arguments and calls one of them."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from kb.errors import EntryError, KBError, ScanError, UsageError
from kb.files import write_atomic
from kb.model import Record, ScanResult, TreeInfo, Wording
from kb.paths import FAMILIES, REPORTS, cache_dir, data_dir
from kb.releases.published import pinned_release, published_releases
from kb.scan.defaults import DEFAULT_EXCEPTIONS, Progress
from kb.scan.source import SourceSpec, is_release_name, open_tree, release_name

if TYPE_CHECKING:
    from kb.checks.compiled import DerivedIndex
    from kb.checks.predict import Outcome
    from kb.configmodel import ConfigModel
    from kb.explain.match import Explanation, Matcher
    from kb.fit.launch import FitReport
    from kb.model import Merged, Problem
    from kb.records.lint import LintReport
    from kb.releases.bump import Worklist
    from kb.releases.history import History
    from kb.releases.lineage import Lineage
    from kb.search.query import Hit, Searcher, SearchIndex
    from kb.site.build import BuildOptions, BuildReport
    from kb.stages import StageLog, Stages
    from kb.store import Place

Warn = Callable[[str], None]
PageProgress = Callable[[str, int, int], None]


# --- where the tree comes from: validated here for the CLI and the MkDocs plugin alike ---------
def source_spec(source: Optional[str] = None, git: Optional[str] = None, ref: Optional[str] = None,
                vllm_version: Optional[str] = None, wheel: Optional[str] = None,
                include_vendored: bool = False, keep_wheel: bool = False) -> SourceSpec:
    """One tree: a folder, a git ref, a release or a wheel (the pinned release by default)."""
    given = [name for name, value in (("--source", source), ("--git", git), ("--vllm-version", vllm_version),
                                      ("--wheel", wheel)) if value]
    if len(given) > 1:
        raise UsageError(f"give one of --source, --git, --vllm-version, --wheel (got {', '.join(given)})")
    if ref and not git:
        raise UsageError("--ref goes with --git")
    if git and not ref:
        raise UsageError("--git needs --ref (a tag, branch or commit)")
    if not given:
        vllm_version = pinned_release()
    return SourceSpec(source, git, ref, vllm_version, wheel, include_vendored, keep_wheel)


def release_specs(source: Optional[str] = None, git: Optional[str] = None, ref: Optional[str] = None,
                  vllm_version: Optional[str] = None, wheel: Optional[str] = None, include_vendored: bool = False,
                  releases: Optional[str] = None, refs: Optional[str] = None,
                  keep_wheel: bool = False) -> list[SourceSpec]:
    """`--releases 0.30.0,0.31.0` (or `all`: the published list), `--git URL --refs a,b`, or
    one tree as `source_spec` takes it; oldest first."""
    if releases and (vllm_version or source or wheel or git):
        raise UsageError("--releases replaces --vllm-version/--source/--wheel/--git (use --git URL --refs A,B for refs)")
    if refs:
        if not git:
            raise UsageError("--refs goes with --git")
        if ref:
            raise UsageError("give --ref or --refs, not both")
        names = [r.strip() for r in refs.split(",") if r.strip()]
        if not names:
            raise UsageError("--refs needs at least one ref")
        base = source_spec(git=git, ref=names[0], include_vendored=include_vendored)
        return [replace(base, ref=r) for r in names]
    if releases:
        names = published_releases() if releases == "all" else [v.strip() for v in releases.split(",") if v.strip()]
        if not names:
            raise UsageError("--releases needs at least one release, or 'all'")
        return [SourceSpec(vllm_version=v, include_vendored=include_vendored, keep_wheel=keep_wheel) for v in names]
    return [source_spec(source, git, ref, vllm_version, wheel, include_vendored, keep_wheel)]


# --- scan --------------------------------------------------------------------------------------
def scan_release(spec: SourceSpec, exceptions: Sequence[str] = DEFAULT_EXCEPTIONS, jobs: Optional[int] = None,
                 use_cache: bool = True, strict: bool = False, progress: Optional[Progress] = None,
                 pool: Optional[Executor] = None) -> ScanResult:
    from kb.config.store import config_of
    from kb.scan.factcache import FactCache
    from kb.scan.scanner import scan

    cache = cache_dir()
    facts = FactCache(cache / "facts" if use_cache else None)
    try:
        with open_tree(spec, cache) as tree:
            config_folder = cache / "config" if use_cache else None
            # the configuration model is read by a worker while the others scan (None: read it here)
            reading = pool.submit(_config_in_worker, spec, cache, config_folder) if pool is not None else None
            result = scan(tree, exceptions, jobs=jobs, cache=facts, progress=progress, strict=strict, pool=pool)
            config = reading.result() if reading is not None else None
            if config is None:
                config = config_of(tree.paths, tree.read, tree.stamp, config_folder)
            result = replace(result, config=config)
    finally:
        facts.close()
    if not result.sites:
        raise ScanError(f"no raise of {', '.join(exceptions)} found in {result.files} files: is this a vLLM tree?")
    return result


def _config_in_worker(spec: SourceSpec, cache: Path, folder: Optional[Path]) -> Optional[ConfigModel]:
    """In a worker process: the tree's configuration model, or None on any failure (the caller
    then reads it itself, and reports what fails the way it always does)."""
    from kb.config.store import config_of

    try:
        with open_tree(spec, cache) as tree:
            return config_of(tree.paths, tree.read, tree.stamp, folder)
    except Exception:  # reported by the caller's own read
        return None


def read_flags(spec: SourceSpec) -> tuple[TreeInfo, ConfigModel]:
    """The `vllm serve` flags of one tree, read from its source (kb.config); zero flags is an error."""
    from kb.config.store import config_of

    with open_tree(spec, cache_dir()) as tree:
        model = config_of(tree.paths, tree.read, tree.stamp, cache_dir() / "config")
        info = tree.info
    if not model.flags or model.parser_file is None:
        first = model.warnings[0] if model.warnings else None
        raise ScanError(first.message if first else "no `vllm serve` flags found: is this a vLLM tree?",
                        first.path if first else None, first.line if first else None)
    return info, model


def scan_releases(specs: Sequence[SourceSpec], jobs: Optional[int] = None, use_cache: bool = True,
                  progress: Optional[Progress] = None) -> list[tuple[str, ScanResult]]:
    """Each release scanned with one parsed-file cache: a file unchanged between releases is
    parsed once. Names are release versions, else git refs."""
    from kb.workers import worker_pool

    out = []
    workers = jobs if jobs is not None else (os.cpu_count() or 1)
    with worker_pool(workers) if workers > 1 else nullcontext() as pool:  # one pool for all
        for spec in specs:
            result = scan_release(spec, jobs=jobs, use_cache=use_cache, progress=progress, pool=pool)
            out.append((result.tree.release or release_name(spec.ref or result.tree.ref), result))
    names = [n for n, _ in out]
    if len(set(names)) != len(names):
        raise UsageError(f"a release is given twice: {', '.join(names)}")
    return out


# --- merge: curated entries on the records, checks verified --------------------------------------
def errors_folder(errors: Optional[Path]) -> Path:
    """`--errors DIR`, else the curated entries shipped with kb."""
    folder = errors if errors is not None else data_dir("errors")
    if not folder.is_dir():
        raise KBError("no such folder of curated entries", str(folder))
    return folder


def curated_records(scans: Sequence[tuple[str, ScanResult]], errors: Optional[Path], keep_going: bool = False,
                    warn: Optional[Warn] = None, history: Optional[History] = None,
                    set_by_jobs: Optional[int] = None, stages: Optional[Stages] = None) -> Merged:
    """The records of the newest scan with the curated entries merged and their checks
    verified; with several scans, also each error's history and the pages of removed ones.
    Malformed entries fail the job unless keep_going, which skips them with the same located
    message; orphans and stale entries are warned. With `set_by_jobs`, the records also carry
    what sets each error (that many processes resolve it), as pages need them. `stages`: told
    as each part ends."""
    from kb.entries.load import load_entries
    from kb.records.merge import attach_set_by, history_records, merge
    from kb.releases.history import build_history

    loaded = load_entries(errors_folder(errors))
    if loaded.problems and not keep_going:
        raise EntryError([str(p) for p in loaded.problems], " (--keep-going skips the malformed ones)")
    newest = scans[-1][1]
    if len(scans) > 1:
        history = history or build_history(scans)
        # reports quote wordings older than the oldest release built too: the shipped history has them
        merged = merge(newest, loaded.entries, history_records(scans, history), history.aliases,
                       nearest=warn is not None, reports=loaded.reports,
                       wordings=(*release_wordings(scans, history), *release_wordings(scans[-1:]))
                       if loaded.reports else ())
    else:  # what the shipped history says of this release carries entries and reports written for older ids
        lin = lineage_of(newest)
        merged = merge(newest, loaded.entries, nearest=warn is not None, reports=loaded.reports,
                       wordings=lin.wordings if loaded.reports else (), lineage=lin)
    if warn:
        for p in loaded.problems:
            warn(f"skipped: {p}")
        for m in merged.problems:
            if not m.quiet and not m.kept:
                warn(str(m))
        kept = [m for m in merged.problems if m.kept]
        if kept:
            warn(kept_summary(kept, newest.tree.release or newest.tree.ref[:10]))
    if stages is not None:
        stages.done("curated entries", f"{sum(r.entry is not None for r in merged.records):,} merged, "
                                       f"{sum(r.checked for r in merged.records):,} checks verified")
    if set_by_jobs is not None:
        merged = replace(merged, records=tuple(attach_set_by(merged.records, newest.config, set_by_jobs)))
        if stages is not None:
            stages.done("what sets each", f"{len(merged.records):,} errors followed to flags, environment and config.json")
    return merged


def kept_summary(kept: Sequence[Problem], release: str) -> str:
    """One line for the curated knowledge of errors a release no longer raises."""
    reports = sum(p.kind == "removed" and "/reports/" in "/" + p.path for p in kept)
    entries = sum(p.kind == "removed" for p in kept) - reports
    links = sum(p.kind == "related-removed" for p in kept)
    return (f"vLLM {release} no longer raises the errors of {entries} curated entries and {reports} public "
            f"reports ({links} related links to such errors are left out): they stay with the releases that raise "
            "them (`kb lint` lists them, `kb release` gives candidates)")


_LINEAGES: dict[str, Lineage] = {}


def lineage_of(scan: ScanResult) -> Lineage:
    """What the shipped wordings say of this release's ids and of every older one (computed once
    per process and tree: for a release newer than the shipped wordings it diffs them)."""
    from kb.releases.lineage import lineage

    key = hashlib.sha256(json.dumps([scan.tree.release, scan.tree.commit, sorted(scan.file_keys.items()),
                                     len(scan.sites)]).encode()).hexdigest()
    if key not in _LINEAGES:
        _LINEAGES.clear()  # one tree at a time: a process rarely looks at two
        _LINEAGES[key] = lineage(scan)
    return _LINEAGES[key]


# --- the site ----------------------------------------------------------------------------------
def build_releases(specs: Sequence[SourceSpec], options: BuildOptions, jobs: Optional[int] = None,
                   use_cache: bool = True, progress: Optional[PageProgress] = None,
                   errors: Optional[Path] = None, keep_going: bool = False,
                   warn: Optional[Warn] = None, stage_log: Optional[StageLog] = None) -> BuildReport:
    """The site of the newest release (built beside `options.output` and swapped in at the
    end); with several releases, the history of every error across all of them. A site built
    from the same inputs (kb/site/reuse.py) is kept as it is, its warnings said again (not with
    `use_cache` off: what they were is kept in the cache). `stage_log`: told as each stage ends."""
    from kb.releases.history import build_history
    from kb.site import reuse
    from kb.site.build import build_site
    from kb.stages import Stages

    stages = Stages(stage_log)
    key = _input_key(specs, options, errors, keep_going) if use_cache else None
    previous = reuse.previous(options.output, key, cache_dir(), warn is not None) if key is not None else None
    if previous is not None and previous.report is not None:
        for text in previous.warnings:
            if warn is not None:
                warn(text)
        stages.done("site", f"unchanged since the last build (same source, entries, kb and options): "
                            f"{previous.report.files_kept:,} files checked")
        return previous.report
    damaged = previous is not None and previous.damaged
    if damaged and warn is not None:
        warn(f"{options.output}: its files are no longer those the last build wrote: every file is made again")
    said: list[str] = []

    def noted(text: str) -> None:
        said.append(text)
        if warn is not None:
            warn(text)

    note = noted if warn is not None else None  # without one, no warning is worded (merge's nearest ids)

    scan_progress = (lambda done, total: progress("files scanned", done, total)) if progress else None
    scans = scan_releases(specs, jobs, use_cache, scan_progress)
    newest = scans[-1][1].counts
    stages.done("scan", (f"{len(scans)} releases, {sum(r.files for _, r in scans):,} files, {newest['ids']:,} errors "
                         "in the newest") if len(scans) > 1 else f"{newest['files']:,} files, {newest['ids']:,} errors")
    if note is not None:
        for name, result in scans:
            for located in result.warnings:  # files that do not parse, statements too deep to scan
                note(f"{located} (in {name})" if len(scans) > 1 else str(located))
    history = build_history(scans) if len(scans) > 1 else None
    merged = curated_records(scans, errors, keep_going, note, history,
                             options.jobs if options.jobs is not None else (os.cpu_count() or 1), stages)
    report = build_site(scans[-1][1], options, records=merged.records, progress=progress, history=history,
                        wordings=release_wordings(scans, history), warn=note, stages=stages, input_key=key,
                        keep=not damaged)
    if key is not None:
        reuse.remember(cache_dir(), key, said if warn is not None else None, report)
    return report


def _input_key(specs: Sequence[SourceSpec], options: BuildOptions, errors: Optional[Path],
               keep_going: bool) -> Optional[str]:
    """The digest of everything the site is made from (kb/site/reuse.py); None when some input
    cannot be read (the build then says what, where it reads it)."""
    from kb.site.reuse import input_key

    with contextlib.ExitStack() as stack:
        trees = [stack.enter_context(open_tree(spec, cache_dir())) for spec in specs]  # a bad tree: the scan's error
        try:
            return input_key(trees, options, errors_folder(errors), keep_going)
        except (OSError, KBError):
            return None


def release_wordings(scans: Sequence[tuple[str, ScanResult]], history: Optional[History] = None) -> \
        tuple[Wording, ...]:
    """The older wordings the lookup knows: those of the built releases, else (one release) the
    ones shipped with kb, up to this release (kb/releases/lineage.py)."""
    from kb.releases.wording import wordings

    if len(scans) > 1:
        from kb.releases.history import build_history

        return wordings(scans, history or build_history(scans))
    return lineage_of(scans[-1][1]).wordings


def write_wordings(path: Optional[Path] = None, use_cache: bool = True) -> tuple[Path, int]:
    """Scan every published release and write the wordings file that ships with kb."""
    from kb.releases.history import build_history
    from kb.releases.wording import SHIPPED, dumps, wordings

    scans = scan_releases(release_specs(releases="all"), use_cache=use_cache)
    items = wordings(scans, build_history(scans))
    target = path or SHIPPED
    write_atomic(target, dumps(items, [name for name, _ in scans]))
    return target, len(items)


def bump_release(version: str, errors: Optional[Path] = None, write: bool = True, use_cache: bool = True,
                 wordings_file: Optional[Path] = None, releases_file: Optional[Path] = None) -> Worklist:
    """`kb release X`: scan X and the newest release of the shipped wordings, extend the wordings
    by X, pin X (releases.toml), carry and re-verify every curated entry and report on X, and say
    what needs a curator. With `write` false nothing is written (a dry run)."""
    from kb.entries.load import load_entries
    from kb.records.merge import attach_set_by, merge
    from kb.releases.bump import releases_toml, worklist
    from kb.releases.history import diff_scans
    from kb.releases.lineage import lineage, release_key
    from kb.releases.published import RELEASES_TOML
    from kb.releases.wording import SHIPPED, dumps, extend, load

    target = wordings_file or SHIPPED
    releases, items = load(target)
    if not releases:
        raise KBError("no wordings to extend: run `kb wordings` first", str(target))
    old = releases[-1]
    if not is_release_name(version) or release_key(version) is None:
        raise UsageError(f"not a vLLM release: {version!r}")
    newest = release_key(old)
    if version in releases or newest is None or (release_key(version) or ()) <= newest:
        raise UsageError(f"{version} is not newer than {old}, the newest release kb's wordings hold")
    loaded = load_entries(errors_folder(errors))
    if loaded.problems:
        raise EntryError([str(p) for p in loaded.problems])
    scans = scan_releases([SourceSpec(vllm_version=old), SourceSpec(vllm_version=version)], use_cache=use_cache)
    (old_name, old_scan), (_, new_scan) = scans
    diff = diff_scans(old_scan, new_scan, old_name, version)
    grown = extend(items, releases, diff, new_scan)
    lin = lineage(new_scan, ((*releases, version), grown))
    merged = merge(new_scan, loaded.entries, reports=loaded.reports, wordings=lin.wordings, lineage=lin)
    added = {c.new for c in diff.changes if c.kind == "added"}
    fresh = attach_set_by([r for r in merged.records if r.id in added and r.entry is None], new_scan.config,
                          os.cpu_count() or 1)
    by_id = {r.id: r for r in fresh}
    merged = replace(merged, records=tuple(by_id.get(r.id, r) for r in merged.records))
    work = worklist(old_name, new_scan, diff, old_scan, loaded.entries, merged, lin, grown)
    if not write:
        return work
    toml = releases_file or RELEASES_TOML
    try:
        text = releases_toml(toml.read_text(encoding="utf-8"), version)
    except (OSError, ValueError) as e:
        raise KBError(f"cannot update the releases: {e}", str(toml)) from None
    write_atomic(target, dumps(grown, (*releases, version)))
    write_atomic(toml, text.encode("utf-8"))
    load.cache_clear()
    return replace(work, written=(str(target), str(toml)))


def diff_releases(old: SourceSpec, new: SourceSpec, fmt: str = "text", use_cache: bool = True) -> str:
    from kb.records.merge import build_records
    from kb.releases.diff import diff_text, titles
    from kb.releases.history import build_history

    scans = scan_releases([old, new], use_cache=use_cache)
    history = build_history(scans)
    records = build_records(scans[1][1]) + build_records(scans[0][1])
    return diff_text(history.diffs[0], titles(history, records), fmt)


# --- lookup, lint, new, check ----------------------------------------------------------------------
def _compiled_path(kind: str, result: ScanResult, errors: Optional[Path], extra: str = "") -> Path:
    """Where a file compiled from a release's scan and the curated entries is cached: named by
    a digest of the tree, its files, the entries' files and kb's own code, so that finding it
    needs neither a merge (which verifies every check and example fix: seconds) nor parsing
    the entries."""
    from kb.site.build import code_digest

    h = hashlib.sha256(json.dumps([result.tree.ref, result.tree.commit, sorted(result.file_keys.items()),
                                   code_digest(), extra]).encode())
    folder = errors_folder(errors)
    try:
        for p in sorted([*folder.glob("*.yaml"), *(folder / FAMILIES).glob("*.yaml"),  # what load_entries reads
                         *(folder / REPORTS).glob("*.yaml")]):
            h.update(p.relative_to(folder).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    except OSError as e:
        raise KBError(f"cannot read the curated entries: {e.strerror or e}", str(folder)) from None
    digest = h.hexdigest()[:16]
    name = result.tree.release if result.tree.release and is_release_name(result.tree.release) else "ref"
    return cache_dir() / kind / f"{name}-{digest}.json"


def match_index_for(spec: SourceSpec, errors: Optional[Path] = None, use_cache: bool = True,
                    result: Optional[ScanResult] = None) -> Path:
    """The match index the build writes for this release (api/match-index.json.gz), compiled
    once into the cache: `kb explain` reads the same file the site's search does."""
    from kb.explain.index import match_index_json

    result = result or scan_release(spec, use_cache=use_cache)
    wordings = release_wordings([("", result)])
    path = _compiled_path("match-index", result, errors, repr(wordings))
    if not path.exists():
        from kb.derived.attach import attach_derived

        merged = curated_records([("", result)], errors)
        # the meaning and first fix each error's page gives, derived ones too (kb/derived/)
        records = attach_derived(merged.records, result.config, os.cpu_count() or 1, cache_dir())
        try:
            write_atomic(path, match_index_json(records, result.tree.release, wordings))
        except OSError as e:
            raise KBError(f"cannot write the match index into the cache: {e.strerror or e}", str(path)) from None
    return path


def search_index_for(spec: SourceSpec, errors: Optional[Path] = None, use_cache: bool = True,
                     jobs: Optional[int] = None, result: Optional[ScanResult] = None) -> Path:
    """The search index the build writes for this release (api/search-index.json.gz), compiled
    once into the cache: `kb search` ranks with the same file the site's search box does."""
    from kb.search.index import search_index_json

    result = result or scan_release(spec, use_cache=use_cache)
    # the older wordings decide which public reports attach (their titles are indexed)
    path = _compiled_path("search-index", result, errors, repr(release_wordings([("", result)])))
    if not path.exists():
        merged = curated_records([("", result)], errors,
                                 set_by_jobs=jobs if jobs is not None else (os.cpu_count() or 1))
        try:
            write_atomic(path, search_index_json(merged.records, result.tree.release))
        except OSError as e:
            raise KBError(f"cannot write the search index into the cache: {e.strerror or e}", str(path)) from None
    return path


def searcher_for(spec: SourceSpec, site: Optional[Path] = None, errors: Optional[Path] = None,
                 use_cache: bool = True, matcher: Optional[Matcher] = None) -> Searcher:
    """What `kb search` ranks with, loaded once: the release's search index and match index
    (from its answer stores, else the cached ones, or `site`'s api/search-index.json.gz and
    api/match-index.json.gz). `matcher`: the release's, already loaded (kb mcp keeps one)."""
    from kb.explain.match import MATCH_INDEX, Matcher, load_index
    from kb.search.query import SEARCH_INDEX, Searcher, load_search_index

    if site is not None:
        return Searcher(load_search_index(site / SEARCH_INDEX), Matcher(load_index(site / MATCH_INDEX)))
    release = _Release(spec, errors, use_cache)
    return Searcher(_search_index(release), matcher or _matcher(release))


def matcher_for(spec: SourceSpec, errors: Optional[Path] = None, use_cache: bool = True) -> Matcher:
    """What `kb explain` matches with: the release's answer store (kb/store.py: compiled once from
    the match index, read back without a scan), else the match index compiled from a scan
    (match_index_for), stored for the next time."""
    return _matcher(_Release(spec, errors, use_cache))


def stored_matcher_for(spec: SourceSpec, errors: Optional[Path] = None) -> Optional[Matcher]:
    """The release's answer store as `matcher_for` reads it, or None when kb's cache has none (or
    only a damaged one, then removed): never a scan nor a download (the vLLM plugin's answers)."""
    from kb.explain.store import KIND, stored_matcher
    from kb.store import load_store

    return load_store(_Release(spec, errors, True).place(KIND), KIND, stored_matcher)


class _Release:
    """One release, for one answer: its scan and its answer stores' key, each worked out once and
    only when needed (a warm answer needs no scan)."""

    def __init__(self, spec: SourceSpec, errors: Optional[Path], use_cache: bool) -> None:
        self.spec, self.errors, self.use_cache = spec, errors, use_cache
        self._scan: Optional[ScanResult] = None
        self._place: Optional[tuple[Path, str]] = None

    def scan(self) -> ScanResult:
        if self._scan is None:
            self._scan = scan_release(self.spec, use_cache=self.use_cache)
        return self._scan

    def place(self, kind: str) -> Optional[Place]:
        """Where its answer store of `kind` is kept and the store's key; None without the cache, for
        a tree without a wheel (a folder, a git ref) or a release not downloaded yet."""
        from kb.store import store_key, store_path

        if self._place is None and self.use_cache:
            wheel = _wheel_of(self.spec)
            if wheel is None:
                return None
            version = wheel.name.split("-")[1] if wheel.name.count("-") >= 2 else ""
            try:
                key = store_key(wheel, errors_folder(self.errors), self.spec.include_vendored)
            except FileNotFoundError:  # the wheel went away: it is read (or fetched) as a tree is
                return None
            self._place = (store_path(cache_dir(), version if is_release_name(version) else "wheel", key), key)
        if self._place is None:
            return None
        stem, key = self._place
        return stem.parent / f"{stem.name}.{kind}", key


def _matcher(release: _Release) -> Matcher:
    from kb.explain.match import Matcher, load_index
    from kb.explain.store import KIND, match_sections, stored_matcher
    from kb.explain.tables import match_tables
    from kb.store import discard, load_store, save_store

    stored = load_store(release.place(KIND), KIND, stored_matcher)
    if stored is not None:
        return stored
    spec, errors, use_cache = release.spec, release.errors, release.use_cache
    path = match_index_for(spec, errors, use_cache, release.scan())
    try:
        index = load_index(path)
    except KBError:  # the cached copy is damaged (truncated, edited, replaced): compile it again
        discard(path, "cached match index")
        index = load_index(match_index_for(spec, errors, use_cache, release.scan()))
    tables = match_tables(index["entries"])
    save_store(release.place(KIND), KIND, lambda: match_sections(index, tables))
    # read back: the first answer comes the way the next ones will (unless the cache cannot be written)
    return load_store(release.place(KIND), KIND, stored_matcher) or Matcher(index, tables)


def _search_index(release: _Release) -> SearchIndex:
    from kb.search.query import read_search_index, search_index_of
    from kb.search.store import KIND, search_sections, stored_search_index
    from kb.store import load_store, save_store

    stored = load_store(release.place(KIND), KIND, stored_search_index)
    if stored is not None:
        return stored
    path = search_index_for(release.spec, release.errors, release.use_cache, result=release.scan())
    try:
        data = read_search_index(path)
        words = search_index_of(data, path)
    except KBError:  # a damaged cached copy: compile it again
        path.unlink(missing_ok=True)
        path = search_index_for(release.spec, release.errors, release.use_cache, result=release.scan())
        data = read_search_index(path)
        words = search_index_of(data, path)
    save_store(release.place(KIND), KIND, lambda: search_sections(data))
    return load_store(release.place(KIND), KIND, stored_search_index) or words


def search_words(query: str, spec: SourceSpec, limit: int = 10, site: Optional[Path] = None,
                 errors: Optional[Path] = None, use_cache: bool = True) -> tuple[str, list[Hit]]:
    """What `kb search` answers (kb.search.query.Searcher.search), with the release it is for."""
    searcher = searcher_for(spec, site, errors, use_cache)
    return searcher.release, searcher.search(query, limit)


def explain_text(text: str, spec: SourceSpec, index: Optional[Path] = None, errors: Optional[Path] = None,
                 use_cache: bool = True) -> Explanation:
    from kb.explain.match import Matcher, explain, load_index

    if index is not None:
        return explain(text, Matcher(load_index(index)))
    return explain(text, matcher_for(spec, errors, use_cache))


def lint_release(spec: SourceSpec, errors: Optional[Path] = None, use_cache: bool = True) -> LintReport:
    from kb.records.lint import lint

    return lint(scan_release(spec, use_cache=use_cache), errors_folder(errors))


def new_entry(spec: SourceSpec, ident: str, errors: Optional[Path] = None, use_cache: bool = True) -> Path:
    """Write errors/<slug>.yaml, a skeleton prefilled from the scan; never overwrites."""
    from kb.entries.load import load_entries
    from kb.records.merge import build_records
    from kb.records.skeleton import skeleton
    from kb.scan.ids import is_id

    if not is_id(ident):
        raise UsageError(f"not an error id (16 lowercase hex characters): {ident!r}")
    result = scan_release(spec, use_cache=use_cache)
    record = next((r for r in build_records(result) if r.id == ident), None)
    if record is None:
        raise KBError(f"id {ident} is not raised in {result.tree.release or result.tree.ref}")
    folder = errors_folder(errors)
    path = folder / f"{record.slug}.yaml"
    if path.exists():
        raise KBError("already exists: edit it instead", str(path))
    taken = next((e.path for e in load_entries(folder).entries if e.id == ident), None)
    if taken:
        raise KBError(f"id {ident} is already curated in {taken}")
    write_atomic(path, skeleton(record, result.tree))
    return path


def check_launch(spec: SourceSpec, argv: Sequence[str], config: Optional[Path] = None,
                 hardware: Optional[dict[str, object]] = None, errors: Optional[Path] = None,
                 use_cache: bool = True, request: Optional[str] = None,
                 env: Optional[Mapping[str, str]] = None) -> Outcome:
    """Whether vLLM's parser takes the command (kb/checks/cli_parse.py, from the scanned flags),
    its configs' field constraints, then which curated errors vLLM would raise for this launch
    (checks with all inputs known), in vLLM's order. Without `config`, the model's config.json
    is looked for on this machine (a local model folder, the Hugging Face cache under `env`,
    os.environ by default: kb/checks/modelconfig.py), never online."""
    from kb.checks.evaluate import work_budget
    from kb.checks.launch import read_config
    from kb.checks.launch_check import check_one
    from kb.checks.modelconfig import ConfigSource, find_config, model_of

    model_config = read_config(config) if config is not None else None
    records, model, derived = _check_inputs(spec, errors, use_cache)
    source = ConfigSource("given", model_config.path) if model_config is not None else None
    if model_config is None:
        found, source = find_config(*model_of(argv, model), os.environ if env is None else env)
        model_config = read_config(found) if found is not None else None
    values = None
    if request is not None:
        from kb.checks.request import read_request

        if model is None:
            raise UsageError("kb could not read this tree's request fields", "--request")
        values = read_request(request, model)
    with work_budget():  # a derived check too costly is not run, named (kb/checks/evaluate.py COMMAND_WORK)
        outcome = check_one(records, model, argv, model_config, hardware, derived=derived, request=values)
    return replace(outcome, config=source, release=spec.vllm_version)


def fit_launch(spec: SourceSpec, argv: Sequence[str], config: Optional[Path], hardware: dict[str, object],
               errors: Optional[Path] = None, use_cache: bool = True,
               env: Optional[Mapping[str, str]] = None) -> FitReport:
    """Whether the launch fits the GPU, as vLLM sizes its KV cache (kb/fit/), and when it does not,
    the smallest changes that do (kb/fit/suggest.py): the model's config.json (and the checkpoint's
    size when its files sit beside it). Without `config`, the config.json of the model vLLM would
    read, from a local model folder or the Hugging Face cache under `env` (os.environ by default:
    kb/checks/modelconfig.py), never online; UsageError when there is none."""
    from kb.checks.launch import read_config
    from kb.fit.launch import checkpoint_bytes, fit_one
    from kb.fit.suggest import fit_and_suggest

    records, model, derived = _check_inputs(spec, errors, use_cache)
    found: Optional[str] = None
    if config is None:
        from kb.checks.modelconfig import find_config, model_of

        path, source = find_config(*model_of(argv, model), os.environ if env is None else env)
        if path is None:
            where = f", not in the Hugging Face cache {source.cache}" if source.cache else ""
            raise UsageError(f"give --model-config FILE_OR_DIR: kb found no config.json of {source.model or 'the model'} "
                             f"(not a local folder{where})")
        config, found = path, str(path)
    model_config = read_config(config)
    checkpoint = checkpoint_bytes(Path(model_config.path).parent)
    if model is None:  # refused: no parser to size with
        return replace(fit_one(records, model, argv, model_config, hardware, checkpoint), release=spec.vllm_version)
    return replace(fit_and_suggest(records, model, derived, argv, model_config, hardware, checkpoint),
                   config_read=found, release=spec.vllm_version)


def load_check_inputs(spec: SourceSpec, errors: Optional[Path] = None) -> None:
    """Read what `kb check` and `kb fit` answer from for a release into this process (kb mcp, at
    start), so that the first check is as fast as the next ones."""
    _check_inputs(spec, errors, True)


def _check_inputs(spec: SourceSpec, errors: Optional[Path], use_cache: bool
                  ) -> tuple[Sequence[Record], Optional[ConfigModel], Optional[DerivedIndex]]:
    """The records, flag model and derived checks of a release: from `kb check`'s index in the
    cache (kb/checks/index.py), else scanned (and the index written)."""
    from kb.checks import index
    from kb.checks.launch_check import derived_index

    path = _index_path(spec, errors) if use_cache else None
    stamp = _stamp(path)
    if path is not None and stamp is not None and path in _LOADED and _LOADED[path][0] == stamp:
        return _LOADED[path][1]  # `kb check` with the fit, an MCP session: read once per process
    loaded = index.load(path) if path is not None else None
    if loaded is not None:
        assert path is not None
        _LOADED[path] = (stamp, loaded)
        return loaded
    result = scan_release(spec, use_cache=use_cache)
    merged = curated_records([("", result)], errors)
    derived = derived_index(merged.records, result.config) if result.config is not None else None
    if path is not None and result.config is not None and derived is not None:
        index.save(path, merged.records, result.config, derived)
    return merged.records, result.config, derived


# index path -> (its size and mtime when read, what it held)
_LOADED: dict[Path, tuple[Optional[tuple[int, int]], tuple[Sequence[Record], Optional[ConfigModel], Optional[DerivedIndex]]]] = {}


def _stamp(path: Optional[Path]) -> Optional[tuple[int, int]]:
    try:
        st = path.stat() if path is not None else None
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns) if st is not None else None


def _index_path(spec: SourceSpec, errors: Optional[Path]) -> Optional[Path]:
    """Where `kb check`'s index of a release wheel is kept (kb/checks/index.py); None for a tree
    without a stamp, or a release not downloaded yet."""
    from kb.checks.index import index_path

    wheel = _wheel_of(spec)
    if wheel is None:
        return None
    return index_path(cache_dir(), wheel, errors_folder(errors), spec.include_vendored)


def _wheel_of(spec: SourceSpec) -> Optional[Path]:
    """The release wheel a tree is read from: `--wheel`, or the release's in the cache (None for a
    folder, a git ref, or a release not downloaded yet)."""
    if spec.wheel is not None:
        wheel: Optional[Path] = Path(spec.wheel)
    elif spec.vllm_version is not None and spec.source_dir is None and spec.git is None:
        wheel = next(iter(sorted((cache_dir() / "wheels").glob(f"vllm-{spec.vllm_version}-*.whl"))), None)
    else:
        wheel = None
    return wheel if wheel is not None and wheel.is_file() else None
