"""`kb lint`: the loader, the merge (which verifies every check's cases against vLLM's guard
and every example fix through `kb check`), and the rule that each entry has a check or says
why none can exist."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from kb.entries.load import load_entries
from kb.model import Entry, Merged, ScanResult
from kb.records.merge import merge
from kb.releases.lineage import Lineage, followed, lineage
from kb.releases.wording import load


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
    problems += supersedes_problems(loaded.entries, scan, lin)
    reports = sum(len(r.reports) for r in merged.records)
    return LintReport(tuple(problems), len(loaded.entries), checks, cases, fixes, tuple(manual), tuple(no_check), merged,
                      reports, kept)


def supersedes_problems(entries: Sequence[Entry], scan: ScanResult, lin: Lineage) -> list[str]:
    """Each id an entry `supersedes` is an error id of a published release (the shipped wordings)
    that this release does not raise, under that id or another one its history follows to; an
    id is declared by one entry only. Entries on errors this release does not raise are skipped
    (they are kept as notes)."""
    releases, items = load()
    known = {w.id for w in items}
    raised = dict.fromkeys(s.id for s in scan.sites)
    release = scan.tree.release or scan.tree.ref
    out: list[str] = []
    owner: dict[str, str] = {}
    for e in entries:
        if followed(lin, e.id, raised) is None:
            continue
        for i, old in enumerate(e.supersedes):
            where = f"{e.path}:{e.line_of('supersedes', i)}"
            now = followed(lin, old, raised)
            if now == old:
                out.append(f"{where}: supersedes {old}, which vLLM {release} still raises: only a removed error "
                           "can be superseded")
            elif now is not None:
                out.append(f"{where}: supersedes {old}, which vLLM {release} raises as {now} (the release history "
                           "already follows it)")
            elif releases and old not in known:
                out.append(f"{where}: supersedes {old}, which is no error id of any published release "
                           f"(kb/releases/wordings.json.gz, {releases[0]} to {releases[-1]})")
            elif old in owner:
                out.append(f"{where}: supersedes {old}, which {owner[old]} supersedes too: one live error answers "
                           "for a removed one")
            owner.setdefault(old, e.path)
    return out
