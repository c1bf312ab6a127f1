"""Building the site over every published release, against one release in the same run.

One release: a cold build (fresh parsed-file cache) of the newest release. All releases: a
cold multi-release build (fresh cache again; downloads excluded): files unchanged between
releases are parsed once, so it costs far less than one build per release (target: at most 8x
one release). Then a warm rebuild (nothing changed), and the site's size and file count.

    python bench/releases.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kb.jobs import build_releases, release_specs  # noqa: E402
from kb.site.build import BuildOptions  # noqa: E402
from kb.paths import cache_dir  # noqa: E402
from kb.releases.published import published_releases  # noqa: E402
from kb.scan.source import SourceSpec, download_wheel  # noqa: E402


def fresh_cache(tmp: Path, versions: list[str]) -> None:
    folder = tmp / "cache" / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    for v in versions:
        wheel = download_wheel(v, cache_dir())
        if not (folder / wheel.name).exists():
            os.symlink(wheel, folder / wheel.name)
    os.environ["KB_CACHE_DIR"] = str(tmp / "cache")


def timed(specs: list[SourceSpec], out: Path) -> tuple[float, object]:
    start = time.perf_counter()
    report = build_releases(specs, BuildOptions(out))
    return time.perf_counter() - start, report


def main() -> None:
    versions = published_releases()
    real_cache = cache_dir()
    for v in versions:
        download_wheel(v, real_cache)
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        fresh_cache(Path(a), versions)
        t_one, one = timed([SourceSpec(vllm_version=versions[-1])], Path(a) / "site")
        os.environ.pop("KB_CACHE_DIR")
        fresh_cache(Path(b), versions)
        specs = release_specs(releases="all")
        t_six, six = timed(specs, Path(b) / "site")
        t_warm, warm = timed(specs, Path(b) / "site")
    n = len(versions)
    print(f"releases ({n}): {', '.join(versions)}")
    print(f"one release, cold                 {t_one:7.2f} s   ({one.records} pages)")
    print(f"{n} separate builds ({n} x one)     {n * t_one:7.2f} s")
    print(f"{n} releases in one build, cold    {t_six:7.2f} s   {t_six / t_one:5.2f}x one release   (target <= 8x)"
          f"   ({six.records} pages)")
    print(f"{n} releases, warm rebuild         {t_warm:7.2f} s   {warm.files_written} files rewritten, "
          f"{warm.files_kept} kept")
    print(f"site: one release {one.bytes / 1e6:.0f} MB; all releases {warm.bytes / 1e6:.0f} MB in "
          f"{warm.files_written + warm.files_kept} files")

if __name__ == "__main__":
    main()
