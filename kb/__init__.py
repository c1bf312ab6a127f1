"""vLLM Error KB: the error knowledge base built from vLLM's own source.

Public API: `open_tree` (where the source comes from), `scan` (the raise sites), and
`scan_release` (both, with the user cache). The CLI in `kb.cli` only parses arguments and
calls these.
"""

from __future__ import annotations

from kb.errors import KBError, ScanError, SourceError, UsageError
from kb.scan.ids import error_id
from kb.model import ScanResult, Site, TreeInfo
from kb.scan.scanner import scan
from kb.scan.source import SourceSpec, Tree, open_tree
from kb.jobs import scan_release

from kb.releases.published import pinned_release

# The vLLM release the site describes by default (set in kb/releases.toml).
PINNED_VLLM = pinned_release()

__all__ = [
    "PINNED_VLLM", "KBError", "ScanError", "ScanResult", "Site", "SourceError", "SourceSpec", "Tree",
    "TreeInfo", "UsageError", "error_id", "open_tree", "scan", "scan_release",
]
