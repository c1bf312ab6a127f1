"""Scan speed on a real vLLM release, against a floor measured in the same run.

Floor: read every scanned file from the wheel and `ast.parse` it, one process.
Prints the cold scan on one core and on all cores (fresh parsed-file cache each), the warm
rescan (cache filled, nothing changed), and their ratios to the floor.

    python bench/scan.py [--vllm-version 0.33.0] [--repeat 1]
"""

from __future__ import annotations

import argparse
import ast
import gc
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kb import PINNED_VLLM  # noqa: E402
from kb.scan.extract import may_hold_facts  # noqa: E402
from kb.scan.factcache import FactCache  # noqa: E402
from kb.paths import cache_dir  # noqa: E402
from kb.scan.scanner import scan  # noqa: E402
from kb.scan.source import download_wheel, from_wheel  # noqa: E402


def floor(wheel: Path, collect: bool = True) -> float:
    with from_wheel(wheel, include_vendored=False) as tree:
        if not collect:
            gc.disable()
        start = time.perf_counter()
        for _path, data in tree.items():
            ast.parse(data)
        elapsed = time.perf_counter() - start
        gc.enable()
        return elapsed


def timed_scan(wheel: Path, jobs: int, cache: FactCache) -> tuple[float, int]:
    with from_wheel(wheel, include_vendored=False) as tree:
        start = time.perf_counter()
        result = scan(tree, jobs=jobs, cache=cache)
        return time.perf_counter() - start, len(result.sites)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vllm-version", default=PINNED_VLLM)
    ap.add_argument("--repeat", type=int, default=1, help="take the best of N runs of each measurement")
    args = ap.parse_args()
    wheel = download_wheel(args.vllm_version, cache_dir())
    with from_wheel(wheel, include_vendored=False) as tree:
        files = len(tree.paths)
        size = sum(len(d) for _, d in tree.items())
    cores = os.cpu_count() or 1

    best = lambda f: min(f() for _ in range(args.repeat))  # noqa: E731
    t_floor = best(lambda: floor(wheel))
    t_floor_nogc = best(lambda: floor(wheel, collect=False))
    with from_wheel(wheel, include_vendored=False) as tree:
        skipped = sum(1 for _, d in tree.items() if not may_hold_facts(d))

    def cold(jobs: int) -> float:
        with tempfile.TemporaryDirectory() as d:
            cache = FactCache(Path(d))
            t, _ = timed_scan(wheel, jobs, cache)
            cache.close()
            return t

    t_cold1 = best(lambda: cold(1))
    t_cold_n = best(lambda: cold(cores))
    with tempfile.TemporaryDirectory() as d:
        cache = FactCache(Path(d))
        _, sites = timed_scan(wheel, cores, cache)
        t_warm = best(lambda: timed_scan(wheel, cores, cache)[0])
        tracemalloc.start()
        timed_scan(wheel, 1, FactCache(None))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        cache.close()

    print(f"vllm {args.vllm_version}: {files} files, {size / 1e6:.1f} MB, {sites} sites")
    print(f"floor (read + ast.parse, 1 process)   {t_floor:7.2f} s")
    print(f"  same, cyclic GC off (for reference) {t_floor_nogc:7.2f} s   the scan turns it off while parsing")
    print(f"  files with no 'raise'/'class' token  {skipped:7d}     not parsed by the scan (all are with --strict)")
    print(f"cold scan, 1 core                     {t_cold1:7.2f} s   {t_cold1 / t_floor:5.2f}x floor   (target <= 1.3x)")
    print(f"cold scan, {cores} cores                    {t_cold_n:7.2f} s   {t_cold_n / t_floor:5.2f}x floor   (target < 1.0x)")
    print(f"warm rescan (cache filled)            {t_warm:7.2f} s   {t_warm / t_floor:5.2f}x floor   (target < 0.10x)")
    print(f"peak traced memory, 1-core scan       {peak / 1e6:7.1f} MB")


if __name__ == "__main__":
    main()
