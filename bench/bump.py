"""A release bump (`kb release X`: scan, diff, extend the wordings, carry and re-verify every curated
entry and report) against the full rebuild of the wordings over every published release, in the
same run and on the same warm cache (parsed files and wheels cached; the first run fills it).

The floor: the wordings of every published release but the newest, built from their scans
(`kb wordings` over them). Then the bump to the newest release from that file, timed, and its
output compared byte for byte with the shipped wordings (`kb/releases/wordings.json.gz`, which
holds the newest release): the incremental extension must equal the full rebuild.

    python bench/bump.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kb.jobs import bump_release, release_specs, scan_releases  # noqa: E402
from kb.releases.history import build_history  # noqa: E402
from kb.releases.published import RELEASES_TOML, published_releases  # noqa: E402
from kb.releases.wording import SHIPPED, dumps, wordings  # noqa: E402


def main() -> None:
    versions = published_releases()
    older, newest = versions[:-1], versions[-1]
    scan_releases(release_specs(releases="all"))  # warm: every wheel downloaded and its files parsed once
    with tempfile.TemporaryDirectory() as tmp:
        before, toml = Path(tmp) / "wordings.json.gz", Path(tmp) / "releases.toml"
        start = time.perf_counter()
        scans = scan_releases(release_specs(releases=",".join(older)))
        items = wordings(scans, build_history(scans))
        before.write_bytes(dumps(items, older))
        t_full = time.perf_counter() - start
        toml.write_text(RELEASES_TOML.read_text(encoding="utf-8"))  # a copy: the bump pins (once) in it
        start = time.perf_counter()
        work = bump_release(newest, wordings_file=before, releases_file=toml)
        t_bump = time.perf_counter() - start
        same = before.read_bytes() == SHIPPED.read_bytes()
    print(f"full rebuild of the wordings over {len(older)} releases (warm cache)  {t_full:8.2f} s")
    print(f"kb release {newest} (scan, diff, extend, carry and re-verify)    {t_bump:8.2f} s   "
          f"({t_bump / t_full:.2f}x the full rebuild)")
    print(f"worklist: {work.counts}; to do: {work.todo}")
    print(f"the extended wordings equal the shipped file (a full rebuild): {same}")


if __name__ == "__main__":
    main()
