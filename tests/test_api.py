"""The public API: what `import kb` exposes, each name importable and documented in __all__."""

from __future__ import annotations

import kb

EXPOSED = {
    "PINNED_VLLM", "Entry", "EntryError", "ExprError", "KBError", "RaiseSite", "Record", "ScanError", "ScanResult",
    "SourceError", "SourceSpec", "Tree", "TreeInfo", "UsageError", "build_releases", "check_launch",
    "curated_records", "diff_releases", "error_id", "explain_text", "lint_release", "match_index_for", "new_entry",
    "open_tree", "pinned_release", "published_releases", "release_specs", "scan", "scan_release", "scan_releases",
    "source_spec",
}


def test_public_names() -> None:
    assert set(kb.__all__) == EXPOSED
    assert all(getattr(kb, name) is not None for name in kb.__all__)
    assert kb.PINNED_VLLM == kb.pinned_release()
