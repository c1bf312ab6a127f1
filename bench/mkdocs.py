"""The MkDocs plugin on a real release: `mkdocs build` of a small Material site with
`include: curated` and `include: all`, beside the standalone `kb build` of the same release
(all three with the parsed-file cache warm, so that they compare rendering).

    python bench/mkdocs.py [--vllm-version 0.33.0]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kb import PINNED_VLLM  # noqa: E402
from kb.jobs import build_releases, scan_release  # noqa: E402
from kb.site.build import BuildOptions  # noqa: E402
from kb.scan.source import SourceSpec  # noqa: E402

CONFIG = """site_name: vLLM
theme:
  name: material
  palette:
    - media: "(prefers-color-scheme: light)"
      scheme: default
    - media: "(prefers-color-scheme: dark)"
      scheme: slate
plugins:
  - search
  - vllm-errors:
      release: {release}
      path: errors
      include: {include}
"""


def mkdocs(folder: Path, release: str, include: str) -> tuple[float, int]:
    (folder / "docs").mkdir(parents=True)
    (folder / "docs" / "index.md").write_text("# vLLM\n")
    (folder / "mkdocs.yml").write_text(CONFIG.format(release=release, include=include))
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(folder / "site")],
                   cwd=folder, check=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    elapsed = time.perf_counter() - start
    return elapsed, sum(1 for _ in (folder / "site").rglob("*.html"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vllm-version", default=PINNED_VLLM)
    args = ap.parse_args()
    scan_release(SourceSpec(vllm_version=args.vllm_version))  # warm the cache
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        report = build_releases([SourceSpec(vllm_version=args.vllm_version)], BuildOptions(Path(tmp) / "kb-site"))
        t_kb = time.perf_counter() - start
        t_cur, n_cur = mkdocs(Path(tmp) / "curated", args.vllm_version, "curated")
        t_all, n_all = mkdocs(Path(tmp) / "all", args.vllm_version, "all")
    print(f"vllm {args.vllm_version} (scan cache warm)")
    print(f"standalone kb build              {t_kb:7.2f} s   {report.records} error pages")
    print(f"mkdocs build, include: curated   {t_cur:7.2f} s   {n_cur} HTML pages")
    print(f"mkdocs build, include: all       {t_all:7.2f} s   {n_all} HTML pages (nav: index + curated pages only)")


if __name__ == "__main__":
    main()
