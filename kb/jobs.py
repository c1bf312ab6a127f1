"""Whole jobs, as the CLI runs them: source -> scan (-> document)."""

from __future__ import annotations

import os
import tempfile
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from kb.errors import KBError, ScanError
from kb.scan.factcache import FactCache
from kb.model import ScanResult
from kb.paths import cache_dir
from kb.scan.scanner import Progress, scan
from kb.scan.source import SourceSpec, open_tree

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from kb.site.build import BuildOptions, BuildReport
    from kb.checks.predict import Outcome
    from kb.explain.match import Explanation
    from kb.records.lint import LintReport
    from kb.records.merge import Merged


def scan_release(
    spec: SourceSpec,
    exceptions: Sequence[str] = ("ValueError",),
    jobs: Optional[int] = None,
    use_cache: bool = True,
    strict: bool = False,
    progress: Optional[Progress] = None,
    pool: Optional["Executor"] = None,
) -> ScanResult:
    cache = cache_dir()
    facts = FactCache(cache / "facts" if use_cache else None)
    try:
        with open_tree(spec, cache) as tree:
            result = scan(tree, exceptions, jobs=jobs, cache=facts, progress=progress, strict=strict, pool=pool)
    finally:
        facts.close()
    if not result.sites:
        raise ScanError(f"no raise of {', '.join(exceptions)} found in {result.files} files: is this a vLLM tree?")
    return result


class EntryError(KBError):
    """Malformed curated entries: each problem is located (`errors/x.yaml:3: ...`)."""

    def __init__(self, problems: Sequence[str], hint: str = "") -> None:
        super().__init__(f"{len(problems)} problem(s) in curated entries{hint}")
        self.problems = list(problems)


def errors_folder(errors: Optional[Path]) -> Path:
    """`--errors DIR`, else the curated entries shipped with kb."""
    from kb.paths import data_dir

    folder = errors if errors is not None else data_dir("errors")
    if not folder.is_dir():
        raise KBError("no such folder of curated entries", str(folder))
    return folder


def curated_records(result: ScanResult, errors: Optional[Path], keep_going: bool = False,
                    warn: Optional[Callable[[str], None]] = None) -> "Merged":
    """Load and merge the curated entries. Malformed ones fail the job unless keep_going,
    which skips them with the same located message; orphans and stale entries are warned."""
    from kb.entries.load import load_entries
    from kb.records.merge import merge

    loaded = load_entries(errors_folder(errors))
    if loaded.problems and not keep_going:
        raise EntryError([str(p) for p in loaded.problems], " (--keep-going skips the malformed ones)")
    merged = merge(result, loaded.entries)
    if warn:
        for p in loaded.problems:
            warn(f"skipped: {p}")
        for m in merged.problems:
            warn(str(m))
    return merged


def build_release(spec: SourceSpec, options: "BuildOptions", jobs: Optional[int] = None, use_cache: bool = True,
                  progress: Optional[Callable[[str, int, int], None]] = None, errors: Optional[Path] = None,
                  keep_going: bool = False, warn: Optional[Callable[[str], None]] = None) -> "BuildReport":
    """Scan the tree, merge the curated entries, render the whole site into `options.output`
    (built beside it and swapped in at the end)."""
    from kb.site.build import build_site

    scan_progress = (lambda done, total: progress("files scanned", done, total)) if progress else None
    result = scan_release(spec, jobs=jobs, use_cache=use_cache, progress=scan_progress)
    merged = curated_records(result, errors, keep_going, warn)
    return build_site(result, options, records=merged.records, progress=progress)


def release_specs(spec: SourceSpec, releases: Optional[str], refs: Optional[str]) -> list[SourceSpec]:
    """`--releases 0.30.0,0.31.0` (or `all`: the published list) or `--git URL --refs a,b`, oldest first."""
    from dataclasses import replace

    from kb.releases.published import published_releases

    if refs:
        if not spec.git:
            raise KBError("--refs goes with --git")
        return [replace(spec, ref=r.strip()) for r in refs.split(",") if r.strip()]
    names = published_releases() if releases == "all" else [v.strip() for v in (releases or "").split(",") if v.strip()]
    if not names:
        return [spec]
    return [SourceSpec(vllm_version=v, include_vendored=spec.include_vendored) for v in names]


def scan_releases(specs: Sequence[SourceSpec], jobs: Optional[int] = None, use_cache: bool = True,
                  progress: Optional[Progress] = None) -> list[tuple[str, ScanResult]]:
    """Each release scanned with one parsed-file cache: a file unchanged between releases is
    parsed once. Names are release versions, else git refs."""
    from concurrent.futures import ProcessPoolExecutor

    out = []
    workers = jobs if jobs is not None else (os.cpu_count() or 1)
    with ProcessPoolExecutor(max_workers=workers) if workers > 1 else nullcontext() as pool:  # one pool for all
        for spec in specs:
            result = scan_release(spec, jobs=jobs, use_cache=use_cache, progress=progress, pool=pool)
            out.append((result.tree.release or spec.ref or result.tree.ref, result))
    names = [n for n, _ in out]
    if len(set(names)) != len(names):
        raise KBError(f"a release is given twice: {', '.join(names)}")
    return out


def build_releases(specs: Sequence[SourceSpec], options: "BuildOptions", jobs: Optional[int] = None,
                   use_cache: bool = True, progress: Optional[Callable[[str, int, int], None]] = None,
                   errors: Optional[Path] = None, keep_going: bool = False,
                   warn: Optional[Callable[[str], None]] = None) -> "BuildReport":
    """The site of the newest release with the history of every error across all of them."""
    from kb.site.build import build_site
    from kb.entries.load import load_entries
    from kb.releases.history import build_history
    from kb.records.merge import history_records, merge

    if len(specs) == 1:
        return build_release(specs[0], options, jobs, use_cache, progress, errors, keep_going, warn)
    scan_progress = (lambda done, total: progress("files scanned", done, total)) if progress else None
    scans = scan_releases(specs, jobs, use_cache, scan_progress)
    history = build_history(scans)
    loaded = load_entries(errors_folder(errors))
    if loaded.problems and not keep_going:
        raise EntryError([str(p) for p in loaded.problems], " (--keep-going skips the malformed ones)")
    newest = scans[-1][1]
    merged = merge(newest, loaded.entries, history_records(scans, history), history.aliases)
    if warn:
        for p in loaded.problems:
            warn(f"skipped: {p}")
        for m in merged.problems:
            warn(str(m))
    return build_site(newest, options, records=merged.records, progress=progress, history=history)


def diff_releases(old: SourceSpec, new: SourceSpec, fmt: str = "text", use_cache: bool = True) -> str:
    from kb.releases.history import build_history
    from kb.records.merge import build_records
    from kb.site.releases import _titles, diff_text

    scans = scan_releases([old, new], use_cache=use_cache)
    history = build_history(scans)
    records = build_records(scans[1][1]) + build_records(scans[0][1])
    return diff_text(history.diffs[0], _titles(history, records), fmt)


def match_index_for(spec: SourceSpec, errors: Optional[Path] = None, use_cache: bool = True) -> Path:
    """The match index the build writes for this release (api/match-index.json), compiled
    once into the cache: `kb explain` reads the same file the site's search does."""
    import hashlib
    import json

    from kb.site.build import code_digest
    from kb.explain.index import match_index

    result = scan_release(spec, use_cache=use_cache)
    merged = curated_records(result, errors)
    digest = hashlib.sha256(json.dumps([result.tree.ref, result.tree.commit, sorted(result.file_keys.items()),
                                        [repr(r.entry) for r in merged.records if r.entry is not None],
                                        code_digest()]).encode()).hexdigest()[:16]
    path = cache_dir() / "match-index" / f"{result.tree.release or 'ref'}-{digest}.json"
    if not path.is_file():
        write_atomic(path, json.dumps(match_index(merged.records, result.tree.release), sort_keys=True,
                                      ensure_ascii=False, separators=(",", ":")) + "\n")
    return path


def explain_text(text: str, spec: SourceSpec, index: Optional[Path] = None, errors: Optional[Path] = None,
                 use_cache: bool = True) -> "Explanation":
    from kb.explain.match import Matcher, explain, load_index

    path = index if index is not None else match_index_for(spec, errors, use_cache)
    return explain(text, Matcher(load_index(path)))


def lint_release(spec: SourceSpec, errors: Optional[Path] = None, use_cache: bool = True) -> "LintReport":
    from kb.records.lint import lint

    return lint(scan_release(spec, use_cache=use_cache), errors_folder(errors))


def new_entry(spec: SourceSpec, ident: str, errors: Optional[Path] = None, use_cache: bool = True) -> Path:
    """Write errors/<slug>.yaml, a skeleton prefilled from the scan; never overwrites."""
    from kb.scan.ids import is_id
    from kb.records.merge import build_records
    from kb.entries.skeleton import skeleton

    if not is_id(ident):
        raise KBError(f"not an error id (16 lowercase hex characters): {ident!r}")
    result = scan_release(spec, use_cache=use_cache)
    record = next((r for r in build_records(result) if r.id == ident), None)
    if record is None:
        raise KBError(f"id {ident} is not raised in {result.tree.release or result.tree.ref}")
    folder = errors_folder(errors)
    path = folder / f"{record.slug}.yaml"
    if path.exists():
        raise KBError("already exists: edit it instead", str(path))
    from kb.entries.load import load_entries

    taken = next((e.path for e in load_entries(folder).entries if e.id == ident), None)
    if taken:
        raise KBError(f"id {ident} is already curated in {taken}")
    write_atomic(path, skeleton(record, result.tree))
    return path


def check_launch(spec: SourceSpec, argv: Sequence[str], config: Optional[Path] = None,
                 hardware: Optional[dict[str, object]] = None, errors: Optional[Path] = None,
                 use_cache: bool = True) -> "Outcome":
    """Which curated errors vLLM would raise for this launch (checks with all inputs known)."""
    from kb.checks.predict import predict
    from kb.checks.launch import parse_launch, read_config

    result = scan_release(spec, use_cache=use_cache)
    merged = curated_records(result, errors)
    model_config = read_config(config) if config is not None else None
    return predict(merged.records, parse_launch(argv, model_config, hardware))


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` via a temporary file beside it: never a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


__all__ = ["EntryError", "KBError", "build_release", "build_releases", "diff_releases", "explain_text", "check_launch", "curated_records", "lint_release", "new_entry",
           "scan_release", "write_atomic"]
