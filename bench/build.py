"""Full site build of a real vLLM release, against the one-core scan floor of the same run.

Floor: read + `ast.parse` of every scanned file, one process. Cold: a fresh cache (only the
wheel in it) and an empty output folder, all cores. Warm: the same build again over the built
site (nothing changed: the site is kept as it is). Each prints its wall time, its CPU time (this
process and its workers) and its stages, as `kb build` writes them into a CI log.
`--baseline REF`: also cold builds with kb's code at a git ref (the whole tree exported with `git archive`,
run as `kb build` in a subprocess, like this checkout's, alternating, `--rounds` times each),
and prints the ratio of their medians.

    python bench/build.py [--vllm-version 0.33.0] [--baseline REF [--rounds 2]]
"""

from __future__ import annotations

import argparse
import ast
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kb import PINNED_VLLM
from kb.explain.match import MATCH_INDEX
from kb.jobs import build_releases
from kb.paths import cache_dir
from kb.scan.source import SourceSpec, download_wheel, from_wheel
from kb.search.query import SEARCH_INDEX
from kb.site.build import BuildOptions, BuildReport
from kb.stages import stage_line


def floor(wheel: Path) -> tuple[float, float]:
    """Wall and CPU seconds of reading and parsing every scanned file, in this process."""
    with from_wheel(wheel, include_vendored=False) as tree:
        start, cpu = time.perf_counter(), time.process_time()
        for _path, data in tree.items():
            ast.parse(data)
        return time.perf_counter() - start, time.process_time() - cpu


def cpu_seconds() -> float:
    """CPU time of this process and of its workers that have ended."""
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                  resource.getrusage(resource.RUSAGE_CHILDREN)))


def timed_build(spec: SourceSpec, site: Path) -> tuple[BuildReport, float, float, list[str]]:
    """The build's report, wall and CPU seconds, and its stage lines."""
    lines: list[str] = []
    start, cpu = time.perf_counter(), cpu_seconds()
    report = build_releases([spec], BuildOptions(site), stage_log=lambda *a: lines.append(stage_line(*a)))
    return report, time.perf_counter() - start, cpu_seconds() - cpu, lines


def sizes(site: Path) -> dict[str, tuple[int, int]]:
    groups: dict[str, tuple[int, int]] = {}
    for p in site.rglob("*"):
        if not p.is_file():
            continue
        rel = p.relative_to(site).as_posix()
        kind = ("search indexes" if rel in (MATCH_INDEX, SEARCH_INDEX) else "JSON" if rel.startswith("api/") and not rel.endswith(".html")
                else "HTML pages" if rel.endswith(".html") else "other")
        n, b = groups.get(kind, (0, 0))
        groups[kind] = (n + 1, b + p.stat().st_size)
    return groups


ROOT = Path(__file__).resolve().parent.parent


def cold_cli_build(code: Path, wheel: Path, version: str, tmp: Path) -> float:
    """Seconds of `kb build` run from the kb package in `code`, with a fresh cache holding only the wheel."""
    cache = tmp / "cache"
    (cache / "wheels").mkdir(parents=True)
    os.symlink(wheel, cache / "wheels" / wheel.name)
    env = {**os.environ, "KB_CACHE_DIR": str(cache), "PYTHONPATH": str(code)}
    cmd = [sys.executable, "-c", "import sys; from kb.cli import main; sys.exit(main())",
           "build", "--vllm-version", version, "-o", str(tmp / "site"), "--quiet"]
    start = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=tmp, check=True)
    return time.perf_counter() - start


def against_baseline(ref: str, rounds: int, wheel: Path, version: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        base.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        times: dict[str, list[float]] = {"baseline": [], "current": []}
        for n in range(rounds):
            for name, code in (("baseline", base), ("current", ROOT)):
                run = Path(tmp) / f"{name}-{n}"
                run.mkdir()
                times[name].append(cold_cli_build(code, wheel, version, run))
                print(f"  round {n + 1}: {name:8s} cold build {times[name][-1]:7.2f} s", flush=True)
    b, c = statistics.median(times["baseline"]), statistics.median(times["current"])
    print(f"cold build at {ref} (median of {rounds})  {b:7.2f} s")
    print(f"cold build of this checkout            {c:7.2f} s   {c / b:5.2f}x the baseline   (target <= 1.2x)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vllm-version", default=PINNED_VLLM)
    ap.add_argument("--baseline", metavar="REF", help="also compare cold builds against kb at this git ref")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    wheel = download_wheel(args.vllm_version, cache_dir())
    if args.baseline:
        against_baseline(args.baseline, args.rounds, wheel, args.vllm_version)
    cores = os.cpu_count() or 1
    t_floor, cpu_floor = floor(wheel)
    with tempfile.TemporaryDirectory() as tmp:
        cold_cache = Path(tmp) / "cache"
        (cold_cache / "wheels").mkdir(parents=True)
        os.symlink(wheel, cold_cache / "wheels" / wheel.name)
        os.environ["KB_CACHE_DIR"] = str(cold_cache)
        site = Path(tmp) / "site"
        spec = SourceSpec(vllm_version=args.vllm_version)
        cold, t_cold, cpu_cold, cold_stages = timed_build(spec, site)
        warm, t_warm, cpu_warm, warm_stages = timed_build(spec, site)
        groups = sizes(site)
        largest_page = max((p for p in site.rglob("*.html")), key=lambda p: p.stat().st_size)
        largest = (largest_page.relative_to(site), largest_page.stat().st_size)

    print(f"vllm {args.vllm_version}: {cold.records} error ids, {cores} cores")
    print(f"scan floor (read + ast.parse, 1 core)  {t_floor:7.2f} s   CPU {cpu_floor:.2f} s")
    print(f"cold build ({cores} cores, empty caches)     {t_cold:7.2f} s   {t_cold / t_floor:5.2f}x floor   "
          f"(target <= 2.0x); CPU {cpu_cold:.1f} s ({cpu_cold / cpu_floor:.2f}x the floor's)")
    for line in cold_stages:
        print(f"  {line}")
    print(f"warm rebuild (nothing changed)         {t_warm:7.2f} s   {warm.files_written} files rewritten, "
          f"{warm.files_kept} kept   (target < 2 s, nothing rewritten); CPU {cpu_warm:.2f} s")
    for line in warm_stages:
        print(f"  {line}")
    for kind, (n, b) in sorted(groups.items()):
        print(f"  {kind:14s} {n:6d} files  {b / 1e6:8.1f} MB")
    print(f"  largest page: {largest[0]}  {largest[1] / 1e3:.1f} KB   (target < 50 KB)")


if __name__ == "__main__":
    main()
