"""The size and file count of a built site, by top-level folder, and which static hosts it fits.

    python bench/site_size.py SITE_DIR [SITE_DIR ...]

Bytes are the sum of the files' sizes (what a host stores and counts), not `du`'s, which adds
the directories' own blocks."""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

# Published limits of static hosts (checked 2026): total size and number of files per deploy.
HOSTS = [
    ("GitHub Pages", 1_000_000_000, None),
    ("Cloudflare Pages", None, 20_000),
    ("Netlify", None, None),
    ("GitLab Pages", 1_000_000_000, None),
]


def measure(site: Path) -> tuple[Counter[str], Counter[str]]:
    size: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for root, _, files in os.walk(site):
        for name in files:
            path = Path(root) / name
            rel = path.relative_to(site).parts
            top = rel[0] if len(rel) == 1 or rel[0] != "api" else "/".join(rel[:2])
            size[top] += path.stat().st_size
            count[top] += 1
    return size, count


def main(argv: list[str]) -> int:
    for arg in argv:
        size, count = measure(Path(arg))
        total, files = sum(size.values()), sum(count.values())
        print(f"{arg}: {total / 1e6:.1f} MB in {files:,} files")
        for top, n in size.most_common():
            print(f"  {top:<24} {n / 1e6:8.1f} MB {count[top]:8,} files")
        fits = [name for name, cap, cap_files in HOSTS
                if (cap is None or total <= cap) and (cap_files is None or files <= cap_files)]
        print(f"  fits: {', '.join(fits) or 'none of ' + ', '.join(h[0] for h in HOSTS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
