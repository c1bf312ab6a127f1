"""Full site build of a real vLLM release, against the one-core scan floor of the same run.

Floor: read + `ast.parse` of every scanned file, one process. Cold: a fresh parsed-file cache
and an empty output folder, all cores. Warm: the same build again over the built site.

    python bench/build.py [--vllm-version 0.33.0]
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kb import PINNED_VLLM  # noqa: E402
from kb.jobs import build_releases  # noqa: E402
from kb.site.build import BuildOptions  # noqa: E402
from kb.paths import cache_dir  # noqa: E402
from kb.scan.source import SourceSpec, download_wheel, from_wheel  # noqa: E402


def floor(wheel: Path) -> float:
    with from_wheel(wheel, include_vendored=False) as tree:
        start = time.perf_counter()
        for _path, data in tree.items():
            ast.parse(data)
        return time.perf_counter() - start


def sizes(site: Path) -> dict[str, tuple[int, int]]:
    groups: dict[str, tuple[int, int]] = {}
    for p in site.rglob("*"):
        if not p.is_file():
            continue
        rel = p.relative_to(site).as_posix()
        kind = ("search index" if rel == "api/match-index.json" else "JSON" if rel.startswith("api/") and not rel.endswith(".html")
                else "HTML pages" if rel.endswith(".html") else "other")
        n, b = groups.get(kind, (0, 0))
        groups[kind] = (n + 1, b + p.stat().st_size)
    return groups


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vllm-version", default=PINNED_VLLM)
    args = ap.parse_args()
    wheel = download_wheel(args.vllm_version, cache_dir())
    cores = os.cpu_count() or 1
    t_floor = floor(wheel)
    with tempfile.TemporaryDirectory() as tmp:
        cold_cache = Path(tmp) / "cache"
        (cold_cache / "wheels").mkdir(parents=True)
        os.symlink(wheel, cold_cache / "wheels" / wheel.name)
        os.environ["KB_CACHE_DIR"] = str(cold_cache)
        site = Path(tmp) / "site"
        spec = SourceSpec(vllm_version=args.vllm_version)
        start = time.perf_counter()
        cold = build_releases([spec], BuildOptions(site))
        t_cold = time.perf_counter() - start
        start = time.perf_counter()
        warm = build_releases([spec], BuildOptions(site))
        t_warm = time.perf_counter() - start
        groups = sizes(site)
        largest_page = max((p for p in site.rglob("*.html")), key=lambda p: p.stat().st_size)
        largest = (largest_page.relative_to(site), largest_page.stat().st_size)

    print(f"vllm {args.vllm_version}: {cold.records} error ids, {cores} cores")
    print(f"scan floor (read + ast.parse, 1 core)  {t_floor:7.2f} s")
    print(f"cold build ({cores} cores, empty caches)     {t_cold:7.2f} s   {t_cold / t_floor:5.2f}x floor   (target <= 2.0x)")
    print(f"warm rebuild (nothing changed)         {t_warm:7.2f} s   {warm.files_written} files rewritten, "
          f"{warm.files_kept} kept   (target < 2 s, nothing rewritten)")
    for kind, (n, b) in sorted(groups.items()):
        print(f"  {kind:14s} {n:6d} files  {b / 1e6:8.1f} MB")
    print(f"  largest page: {largest[0]}  {largest[1] / 1e3:.1f} KB   (target < 50 KB)")


if __name__ == "__main__":
    main()
