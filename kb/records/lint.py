"""`kb lint`: the loader, the merge (which verifies every check's cases against vLLM's guard
and every example fix through `kb check`), and the rule that each entry has a check or says
why none can exist."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from kb.entries.load import load_entries
from kb.model import ScanResult
from kb.records.merge import Merged, merge
from kb.releases.lineage import lineage


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
    reports: int = 0  # public reports whose quote matched their error
    kept: tuple[str, ...] = ()  # notes: entries, reports and links on errors the release no longer raises


def lint(scan: ScanResult, folder: Path) -> LintReport:
    loaded = load_entries(folder)
    lin = lineage(scan)  # entries and reports written for an older id of an error follow it
    merged = merge(scan, loaded.entries, reports=loaded.reports, wordings=lin.wordings if loaded.reports else (),
                   lineage=lin)
    problems = [str(p) for p in loaded.problems] + [str(p) for p in merged.problems if not p.kept and p.kind != "newer"]
    kept = tuple(str(p) for p in merged.problems if p.kept)
    problems += [str(p) for p in merged.verification]
    checks = cases = fixes = 0
    manual: list[tuple[str, str, str]] = []
    no_check: list[tuple[str, str, str]] = []
    for r in merged.records:
        e = r.entry
        if e is None:
            continue
        if e.example_fix is not None and (e.check is not None or e.example_fix.language == "shell"):
            fixes += 1  # run through kb check (and kb fit for the memory errors) by the merge
        if e.check is None:
            if e.no_check is None:
                problems.append(f"{e.path}:1: needs a check, or no_check: <why no check can predict this error>")
            else:
                no_check.append((r.id, e.path, e.no_check))
            continue
        checks += 1
        cases += len(e.check.cases)
        if e.check.source_check == "manual":
            manual.append((r.id, e.path, e.check.source_reason or ""))
    reports = sum(len(r.reports) for r in merged.records)
    return LintReport(tuple(problems), len(loaded.entries), checks, cases, fixes, tuple(manual), tuple(no_check), merged,
                      reports, kept)
