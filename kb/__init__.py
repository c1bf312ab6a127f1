"""vLLM Error KB: the error knowledge base built from vLLM's own source.

The public API is the jobs the `kb` command runs (`kb.jobs`: scan, build, explain, lint,
check), the stage functions they are made of, and the data types that cross stages
(`kb.model`). The CLI in `kb.cli` only parses arguments and calls these.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from kb.errors import EntryError, ExprError, KBError, ScanError, SourceError, UsageError

if TYPE_CHECKING:
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

    PINNED_VLLM: str

# Each public name -> the module that defines it, imported when the name is first used: `kb check`
# and `kb explain` start without loading the scanner, the site builder and their dependencies.
_WHERE = {
    **dict.fromkeys(("build_releases", "check_launch", "curated_records", "diff_releases", "explain_text",
                     "lint_release", "match_index_for", "new_entry", "release_specs", "scan_release",
                     "scan_releases", "source_spec"), "kb.jobs"),
    **dict.fromkeys(("Entry", "RaiseSite", "Record", "ScanResult", "TreeInfo"), "kb.model"),
    **dict.fromkeys(("pinned_release", "published_releases"), "kb.releases.published"),
    "error_id": "kb.scan.ids", "scan": "kb.scan.scanner",
    **dict.fromkeys(("SourceSpec", "Tree", "open_tree"), "kb.scan.source"),
}


def __getattr__(name: str) -> Any:
    if name == "PINNED_VLLM":  # the vLLM release the site describes by default (kb/releases/releases.toml)
        value = importlib.import_module("kb.releases.published").pinned_release()
    elif name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
    else:
        raise AttributeError(f"module 'kb' has no attribute {name!r}")
    globals()[name] = value
    return value


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
