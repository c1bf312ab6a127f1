"""ScanResult <-> the JSON document that `kb scan` writes (schema: kb/schemas/scan.schema.json)."""

from __future__ import annotations

import json
from typing import Any

from kb.model import ScanResult

SCAN_FORMAT = "kb-scan/1"


def scan_document(result: ScanResult) -> dict[str, Any]:
    t = result.tree
    document = {
        "format": SCAN_FORMAT,
        "repo": "vllm-project/vllm",
        "source": {"kind": t.kind, "location": t.location, "dirty": t.dirty},
        "ref": t.ref,
        "commit": t.commit,
        "commit_date": t.commit_date,
        "release": t.release,
        "id_scheme": result.id_scheme,
        "exceptions": list(result.exceptions),
        "counts": result.counts,
        "warnings": [{"line": w.line, "message": w.message, "path": w.path} for w in result.warnings],
        "sites": [s.to_json() for s in result.sites],
    }
    if result.config is not None:
        document["config"] = result.config.to_json()
    return document


def dumps(result: ScanResult) -> str:
    """Deterministic text: sorted keys, sites already sorted by (file, line)."""
    return json.dumps(scan_document(result), sort_keys=True, indent=1, ensure_ascii=False) + "\n"
