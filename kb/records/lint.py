"""`kb lint`: the loader, the merge, every check's cases against vLLM's guard, and every
example fix through `kb check`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from kb.checks.predict import verify_check, verify_example_fix
from kb.entries.load import Loaded, load_entries
from kb.records.merge import Merged, merge
from kb.model import Record, ScanResult


@dataclass(frozen=True)
class LintReport:
    problems: tuple[str, ...]
    entries: int
    checks: int
    cases: int
    fixes_run: int
    manual: tuple[tuple[str, str, str], ...]  # (id, path, reason) of checks not cross-validated
    no_check: tuple[tuple[str, str, str], ...]  # (id, path, why no check)
    merged: Optional[Merged] = None


def verified_ids(records: tuple[Record, ...]) -> set[str]:
    """Ids whose check passes its cases (and vLLM's guard) and whose example fix runs right."""
    ok: set[str] = set()
    for r in records:
        if r.entry is not None and r.entry.check is not None and not verify_check(r):
            if r.entry.example_fix is None or not verify_example_fix(r, records):
                ok.add(r.id)
    return ok


def lint(scan: ScanResult, folder: Path) -> LintReport:
    loaded: Loaded = load_entries(folder)
    problems = [str(p) for p in loaded.problems]
    merged = merge(scan, loaded.entries)
    problems += [str(p) for p in merged.problems]
    checks = cases = fixes = 0
    manual: list[tuple[str, str, str]] = []
    no_check: list[tuple[str, str, str]] = []
    for r in merged.records:
        e = r.entry
        if e is None:
            continue
        if e.check is None:
            if e.no_check is None:
                problems.append(f"{e.path}:1: needs a check, or no_check: <why no check can predict this error>")
            else:
                no_check.append((r.id, e.path, e.no_check))
            continue
        checks += 1
        cases += len(e.check.cases)
        problems += [str(p) for p in verify_check(r)]
        if e.check.source_check == "manual":
            manual.append((r.id, e.path, e.check.source_reason or ""))
        if e.example_fix is not None:
            fixes += 1
            problems += [str(p) for p in verify_example_fix(r, merged.records)]
    return LintReport(tuple(problems), len(loaded.entries), checks, cases, fixes, tuple(manual), tuple(no_check), merged)
