"""vLLM Error KB: the error knowledge base built from vLLM's own source.

The public API is the jobs the `kb` command runs (`kb.jobs`: scan, build, explain, lint,
check), the stage functions they are made of, and the data types that cross stages
(`kb.model`). The CLI in `kb.cli` only parses arguments and calls these.
"""

from __future__ import annotations

from kb.errors import EntryError, ExprError, KBError, ScanError, SourceError, UsageError
from kb.jobs import (
    build_releases,
    check_launch,
    curated_records,
    diff_releases,
    explain_text,
    lint_release,
    match_index_for,
    new_entry,
    release_specs,
    scan_release,
    scan_releases,
    source_spec,
)
from kb.model import Entry, RaiseSite, Record, ScanResult, TreeInfo
from kb.releases.published import pinned_release, published_releases
from kb.scan.ids import error_id
from kb.scan.scanner import scan
from kb.scan.source import SourceSpec, Tree, open_tree

# The vLLM release the site describes by default (set in kb/releases/releases.toml).
PINNED_VLLM = pinned_release()

__all__ = [
    "PINNED_VLLM",
    "Entry",
    "EntryError",
    "ExprError",
    "KBError",
    "RaiseSite",
    "Record",
    "ScanError",
    "ScanResult",
    "SourceError",
    "SourceSpec",
    "Tree",
    "TreeInfo",
    "UsageError",
    "build_releases",
    "check_launch",
    "curated_records",
    "diff_releases",
    "error_id",
    "explain_text",
    "lint_release",
    "match_index_for",
    "new_entry",
    "open_tree",
    "pinned_release",
    "published_releases",
    "release_specs",
    "scan",
    "scan_release",
    "scan_releases",
    "source_spec",
]
