"""A whole command's work budget for the checks derived from vLLM's guards (kb/checks/evaluate.py
COMMAND_WORK): the same values are evaluated once, and a guard whose evaluations cost too much in
all is dropped for the rest of the command with a located message naming it, in `kb check` and in
the derived example fix search (`kb build`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from kb.checks import evaluate as ev
from kb.checks.evaluate import holds, work_budget
from kb.derived.attach import derive_guidance, over_budget
from kb.errors import OVER_BUDGET, WorkBudgetExceeded
from kb.jobs import curated_records, scan_release
from kb.scan.source import SourceSpec
from test_derive import ARG_UTILS_DERIVE, PARALLEL_DERIVE
from test_sets import dcp_tree

COSTLY = 5  # guards of ParallelConfig.__post_init__, each some 2,700 characters that build long lists
# 60 lists of 30,000 items: 1.8 million steps an evaluation, so the few values that pass a record's own
# check (the valid values search tries those first) already take a guard past COMMAND_WORK
PARTS = 30


def costly(i: int) -> str:
    part = "len([self.tensor_parallel_size > 1] * 30000) + len([self.decode_context_parallel_size > 1] * 30000) > {n}"
    cond = " and ".join(part.format(n=i + k) for k in range(PARTS))
    return f'''        if self.tensor_parallel_size > {i} and {cond} and self.decode_context_parallel_size == {i - 100}:
            raise ValueError("costly guard {i}")
'''


def costly_tree(root: Path, guards: int = COSTLY) -> Path:
    tree = dcp_tree(root)
    text = PARALLEL_DERIVE.replace("    def __post_init__(self):\n",
                                   "    def __post_init__(self):\n" + "".join(costly(i) for i in range(guards)), 1)
    (tree / "vllm/config/parallel.py").write_text(text)
    (tree / "vllm/engine/arg_utils.py").write_text(ARG_UTILS_DERIVE)
    return tree


def raise_lines(tree: Path) -> dict[str, int]:
    lines = (tree / "vllm/config/parallel.py").read_text().splitlines()
    return {m.group(1): n for n, line in enumerate(lines, 1) if (m := re.search(r'"(costly guard \d)"', line))}


def test_kb_check_drops_a_costly_guard_with_a_located_message(tmp_path: Path) -> None:
    """Five guards that each build lists of 30,000 items, evaluated for each value the valid
    values search tries: `kb check` ends (a process of its own, 120 s at most) and names the
    guards past the budget where they are; the other checks still run."""
    tree = costly_tree(tmp_path / "tree")
    env = {**os.environ, "KB_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "kb", "check", "--no-cache", "--source", str(tree), "--",
                           "vllm", "serve", "m", "-tp", "6", "-dcp", "5", "--distributed-executor-backend", "mp"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert "Traceback" not in done.stderr
    lines = raise_lines(tree)
    dropped = re.findall(r"^Error: (vllm/config/parallel\.py):(\d+): check of \w+ not run: (.*)$", done.stderr, re.M)
    assert dropped and all(reason == OVER_BUDGET for _, _, reason in dropped), done.stderr
    assert {int(line) for _, line, _ in dropped} <= set(lines.values())
    assert "tp must be divisible by dcp when a backend is set" in done.stdout  # the others still run
    assert done.returncode == 2  # not every check ran


def test_the_fix_search_stops_at_the_budget_with_that_reason(tmp_path: Path) -> None:
    """The derived guidance (`kb build`) of a costly guard: no fix, because its condition exceeds
    the budget; the build warns where the guard is."""
    tree = costly_tree(tmp_path / "tree", 1)
    scan = scan_release(SourceSpec(source_dir=str(tree)), use_cache=False)
    records = curated_records([("", scan)], None).records
    found = derive_guidance(records, scan.config, 1)
    by_template = {r.template: r for r in records}
    guard = by_template["costly guard 0"]
    assert found[guard.id].no_fix == OVER_BUDGET
    warned = over_budget([replace(guard, derived=found[guard.id])])
    assert warned == [f"vllm/config/parallel.py:{raise_lines(tree)['costly guard 0']}: check not run: {OVER_BUDGET}"]


def test_the_same_values_are_evaluated_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept by expression and values, lists and dicts frozen, each value with its type: `1` and
    `True` are told apart."""
    calls: list[dict[str, object]] = []
    real = ev._holds

    def counted(expr: str, env: dict[str, object]) -> bool:
        calls.append(dict(env))
        return real(expr, env)

    monkeypatch.setattr(ev, "_holds", counted)
    expr = "isinstance(a, bool) and len(b) > 1 and c.get('k') == 2"
    for _ in range(3):
        assert holds(expr, {"a": True, "b": [1, [2]], "c": {"k": 2}})
    assert not holds(expr, {"a": 1, "b": [1, [2]], "c": {"k": 2}})
    assert not holds(expr, {"a": True, "b": [1, [2]], "c": {"k": 3}})
    assert len(calls) == 3


def test_a_command_drops_a_check_past_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Within one command's scope the steps of every evaluation of an expression add up; past
    the budget it is dropped, until the command ends. Outside a command: no such bound."""
    monkeypatch.setattr(ev, "COMMAND_WORK", 50_000)
    expr = "len([a] * 30000) > b"  # some 30,000 steps each: the second evaluation exceeds the budget
    with work_budget():
        for b in range(2):
            assert holds(expr, {"a": 1, "b": b})
        with pytest.raises(WorkBudgetExceeded):
            holds(expr, {"a": 1, "b": 4})
        with pytest.raises(WorkBudgetExceeded):
            holds(expr, {"a": 1, "b": 0})  # even for values evaluated before
        assert holds("a > b", {"a": 1, "b": 0})  # another check keeps its own budget
    assert holds(expr, {"a": 1, "b": 5})
