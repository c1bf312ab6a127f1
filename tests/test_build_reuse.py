"""`kb build` in a CI log (one line per stage), and a rebuild whose inputs did not change: the
site is kept as it is, checked against its manifest (kb/site/reuse.py)."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from entryhelpers import write_entries
from fixture_tree import tree_files, write_tree
from kb.derivedmodel import DerivedGuidance, MessageCheck
from kb.jobs import build_releases, source_spec
from kb.records.merge import build_records
from kb.site.build import BuildOptions, record_key
from kb.site.output import MANIFEST
from kb.site.views import summary
from sitehelpers import fixture_scan

STAGE = re.compile(r"([a-z ]+): (.+), (\d+\.\d) s")


def kb_build(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`kb build ...` in a process of its own, its standard error a pipe (as in a CI log)."""
    return subprocess.run([sys.executable, "-m", "kb", "build", *argv], capture_output=True, text=True, timeout=300,
                          cwd=cwd)


def test_a_build_into_a_pipe_says_each_stage_with_counts_and_times(tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "tree", tree_files("0.1.0", broken=True))
    errors = write_entries(tmp_path / "errors", {})
    argv = ("--source", str(tree), "--errors", str(errors), "-o", "site", "--jobs", "1")
    first = kb_build(tmp_path, *argv)
    assert first.returncode == 0, first.stderr
    lines = first.stderr.splitlines()
    stages = [m.group(1) for m in map(STAGE.fullmatch, lines) if m]
    assert stages == ["scan", "curated entries", "what sets each", "derived guidance", "pages", "write"]
    assert re.fullmatch(r"scan: \d+ files, 7 errors, \d+\.\d s", lines[0])
    assert lines[1] == "warning: vllm/broken.py:1: cannot parse: invalid syntax"  # warnings between the stages
    assert re.search(r"^pages: 7 error pages rendered, 0 unchanged; \d+ other files", first.stderr, re.M)
    assert re.search(r"^write: \d+ files written, 0 kept, \d+\.\d MB, \d+\.\d s$", first.stderr, re.M)
    assert "\r" not in first.stderr and "\033" not in first.stderr  # no progress display in a log
    assert lines[-1].startswith("7 error pages (7 rendered")

    again = kb_build(tmp_path, *argv)
    assert again.returncode == 0, again.stderr
    assert again.stderr.splitlines()[:2] == [
        "warning: vllm/broken.py:1: cannot parse: invalid syntax",  # said again, as the build said it
        f"site: unchanged since the last build (same source, entries, kb and options): "
        f"{len([p for p in (tmp_path / 'site').rglob('*') if p.is_file()]) - 1} files checked, "
        + again.stderr.splitlines()[1].rsplit(", ", 1)[1]]
    assert again.stderr.splitlines()[2].startswith("7 error pages (0 rendered")

    quiet = kb_build(tmp_path, *argv, "--quiet")
    assert quiet.returncode == 0 and quiet.stderr == "warning: vllm/broken.py:1: cannot parse: invalid syntax\n"


def _names(into: list[str]) -> Callable[[str, str, float], None]:
    """A stage log that keeps the names of the stages."""
    return lambda name, what, seconds: into.append(name)


def _inodes(site: Path) -> dict[str, int]:
    return {p.relative_to(site).as_posix(): p.stat().st_ino for p in [site, *site.rglob("*")]}


def test_a_rebuild_of_the_same_inputs_keeps_the_site_as_it_is(tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "tree", tree_files("0.1.0", broken=True))
    errors = write_entries(tmp_path / "errors", {})
    site = tmp_path / "site"
    spec = source_spec(str(tree))
    said: list[str] = []
    first = build_releases([spec], BuildOptions(site, jobs=1), errors=errors, warn=said.append)
    manifest = json.loads(gzip.decompress((site / MANIFEST).read_bytes()))
    assert len(manifest["input"]) == 32 and len(manifest["content"]) == 32
    before = _inodes(site)
    (tmp_path / ".site.building-x").mkdir()  # a killed build's folder (no owner: an older kb's, an hour old)
    os.utime(tmp_path / ".site.building-x", (0, 0))

    stages: list[str] = []
    again: list[str] = []
    second = build_releases([spec], BuildOptions(site, jobs=1), errors=errors, warn=again.append,
                            stage_log=_names(stages))
    assert _inodes(site) == before  # not a file written, not even the folder swapped
    assert second.files_written == 0 and second.pages_rendered == 0 and second.files_kept == len(manifest["keys"])
    assert second.records == first.records == 7 and second.largest_page == first.largest_page
    assert second.bytes == sum(p.stat().st_size for p in site.rglob("*") if p.is_file() and p.name != MANIFEST)
    assert again == said == ["vllm/broken.py:1: cannot parse: invalid syntax"] and stages == ["site"]
    assert not (tmp_path / ".site.building-x").exists()

    # a page changed in the site: its digest no longer matches, so the site is built (and mended)
    page = next(site.glob("errors/*/index.html"))
    text = page.read_bytes()
    page.write_bytes(text.replace(b"</html>", b"<!-- edited --></html>"))
    told: list[str] = []
    third = build_releases([spec], BuildOptions(site, jobs=1), errors=errors, warn=told.append)
    assert third.files_written == second.files_kept and third.files_kept == 0 and page.read_bytes() == text
    assert told[0] == f"{site}: its files are no longer those the last build wrote: every file is made again"
    # another option, another entry folder, another source file, or no cache: built again
    for options, folder, use_cache in [(BuildOptions(site, site_url="https://x.example", jobs=1), errors, True),
                                       (BuildOptions(site, jobs=1), write_entries(tmp_path / "e2", {}), True),
                                       (BuildOptions(site, jobs=1), errors, False)]:
        names: list[str] = []
        build_releases([spec], options, errors=folder, use_cache=use_cache, stage_log=_names(names))
        assert names[0] == "scan" and names[-1] == "write"
    (tree / "vllm/extra.py").write_text("def f():\n    raise ValueError('one more error')\n")
    changed = build_releases([spec], BuildOptions(site, jobs=1), errors=errors)
    assert changed.pages_rendered == 1 and changed.records == 8


def test_a_page_key_is_the_same_whether_derived_guidance_is_computed_or_read_from_the_cache(tmp_path: Path) -> None:
    """The cache keeps derived guidance as JSON with sorted keys: a flag's fields come back in
    another order. Its page must not count as changed (a warm build re-rendered 50 pages)."""
    records = build_records(fixture_scan(tmp_path / "tree"))
    flag = {"name": "--max-loras", "dest": "max_loras", "default": 1}  # not in sorted order
    computed = DerivedGuidance(meaning="m", message_checks=(MessageCheck(["check"], [flag]),))
    cached = DerivedGuidance.from_json(json.loads(json.dumps(computed.to_json(), sort_keys=True)))
    assert repr(cached) != repr(computed)  # what the key was made from before
    r = records[0]
    summaries = {x.id: summary(x) for x in records}
    assert record_key("g", "f", replace(r, derived=computed), summaries) == \
        record_key("g", "f", replace(r, derived=cached), summaries)
    assert record_key("g", "f", replace(r, derived=computed), summaries) != \
        record_key("g", "f", replace(r, derived=replace(computed, meaning="n")), summaries)


def test_a_set_the_words_compute_reads_the_same_in_every_process() -> None:
    """`args.backend in {"hf", "mii"}` is worked out to a set, written into the page: in the order
    of its items' string hashes, which change with every process, two builds of one release
    differed (`{'hf', 'mii'}` and `{'mii', 'hf'}`). Written sorted, every run reads the same."""
    code = ("import ast; from kb.derived.simplify import simplify; print(ast.unparse(simplify(ast.parse("
            "\"backend in {'mii', 'hf', 'vllm', 'tgi', 'trt', 'sglang'} and x\", mode='eval').body, {})))")
    seen = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60,
                           env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout for seed in range(4)}
    assert seen == {"backend in {'hf', 'mii', 'sglang', 'tgi', 'trt', 'vllm'} and x\n"}
