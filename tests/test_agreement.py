"""`kb check` against real vLLM 0.33.0: every launch recorded by bench/oracle/*_cases.py
(tests/data/oracle-*-0.33.0.json; real vLLM's own parsing and config building on fake GPUs)
scored by bench/agreement.py. The floors are the figures measured when the sets were recorded:
no false alarm on a launch vLLM accepts, and the share with vLLM's first error."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.release
BENCH = Path(__file__).resolve().parent.parent / "bench" / "agreement.py"


def test_kb_check_meets_vllms_first_error_and_never_a_false_alarm() -> None:
    spec = importlib.util.spec_from_file_location("agreement", BENCH)
    assert spec is not None and spec.loader is not None
    agreement = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(agreement)
    counts, shown, _ = agreement.verdicts("0.33.0")
    total = sum(v for k, v in counts.items() if "|" not in k)
    agree = counts["same first error"] + counts["same first error, other words"] + counts["both clean"]
    assert total >= 100
    assert counts["false alarm"] == 0, [c for v, c in shown if v == "false alarm"]
    assert counts["another error first"] == 0, [c for v, c in shown if v == "another error first"]
    assert agree / total >= 0.98, (agree, total, shown)
