#!/usr/bin/env python3
"""Real vLLM on the requests kb's derived example fixes propose for request errors (the checks
kb derives from vLLM's `SamplingParams`, kb/checks/derive.py): each fix's `before` request and its
`after` request go through the release's own `SamplingParams(**fields)` and `.verify(...)`
(inner/request_case.py, in the oracle venv). kb only proposes the requests; the labels are what
the real vLLM raised, written to tests/data/oracle-request-<version>.json, which the default tests
read (tests/test_request_check.py). Prints the agreement: a fix is right when vLLM raises the
fix's error for `before` (its message matches the error's template) and nothing for `after`.

    python3 bench/oracle/request_cases.py [--version 0.34.0]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
from common import HERE, oracle_env, venv_python, write_cases


def template_pattern(template: str) -> re.Pattern[str]:
    """The message's literal text with any value where a placeholder stands (vLLM's validation
    error may add `(parameter=..., value=...)` after it)."""
    parts = re.split(r"\{[^{}]*\}", template)
    return re.compile(".*?".join(re.escape(p) for p in parts), re.S)


def proposed(version: str) -> list[dict[str, Any]]:
    """Each derived request fix of `version`: the error, its template and both requests."""
    import os

    from kb.derived.attach import attach_derived
    from kb.jobs import curated_records, scan_release
    from kb.paths import cache_dir
    from kb.scan.source import SourceSpec

    scan = scan_release(SourceSpec(vllm_version=version))
    assert scan.config is not None
    records = attach_derived(curated_records([("", scan)], None).records, scan.config, os.cpu_count() or 1, cache_dir())
    out = []
    for r in records:
        fix = r.derived.fix if r.derived is not None else None
        if fix is None or fix.request_before is None:
            continue
        out.append({"id": r.id, "template": r.template, "before": fix.request_before, "after": fix.request_after or {},
                    "launch": fix.before, "model_config": fix.model_config})
    return out


def run(requests: list[dict[str, Any]], version: str) -> list[dict[str, Any]]:
    done = subprocess.run([str(venv_python(version)), str(HERE / "inner" / "request_case.py")],
                          input=json.dumps(requests), capture_output=True, text=True, check=True,
                          env=oracle_env(version=version), timeout=900)
    result: list[dict[str, Any]] = json.loads(done.stdout)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default="0.34.0")
    args = parser.parse_args()
    cases = proposed(args.version)
    outcomes = run([c[side] for c in cases for side in ("before", "after")], args.version)
    # the stand-in model config of inner/request_case.py is kb's example model: the same vocabulary
    assert all(c["model_config"].get("vocab_size", 128256) == 128256 for c in cases)
    right = 0
    recorded = []
    for i, c in enumerate(cases):
        before, after = outcomes[2 * i], outcomes[2 * i + 1]
        raised = before.get("outcome") == "error" and template_pattern(c["template"]).match(before.get("message", ""))
        ok = bool(raised) and after.get("outcome") == "ok"
        right += ok
        if not ok:
            print(f"  wrong: {c['id']} {c['before']} -> {before}; {c['after']} -> {after}")
        recorded.append({**c, "before_outcome": before, "after_outcome": after, "agrees": ok})
    print(f"derived request fixes vLLM {args.version} agrees with: {right}/{len(cases)}")
    write_cases("request", args.version, recorded, "request_cases.py", right=right)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
