from __future__ import annotations

from pathlib import Path
from typing import Optional

from fixture_tree import tree_files, write_tree
from kb.records.merge import build_records
from kb.site.build import BuildOptions, BuildReport, build_site
from kb.scan.scanner import scan
from kb.scan.source import from_dir

EVIL = '''
def evil(x):
    if x == "<b>":
        raise ValueError(f"<script>alert('x')</script> bad {x} & more")
'''


def fixture_scan(root: Path, extra: Optional[dict[str, str]] = None):
    files = tree_files("0.1.0", broken=False) | {"vllm/entrypoints/evil.py": EVIL} | (extra or {})
    write_tree(root, files)
    with from_dir(root, include_vendored=False) as t:
        return scan(t, jobs=1)


def build_fixture(tmp_path: Path, out: Optional[Path] = None, site_url: Optional[str] = None,
                  extra: Optional[dict[str, str]] = None) -> tuple[Path, BuildReport]:
    result = fixture_scan(tmp_path / "tree", extra)
    out = out or tmp_path / "site"
    report = build_site(result, BuildOptions(out, site_url=site_url, jobs=1), build_records(result))
    return out, report
