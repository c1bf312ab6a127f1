"""`kb release X`: move kb to a new vLLM release without losing what it knows. The new release
is diffed against the newest one the shipped wordings describe, the wordings are extended by
it, every curated entry and public report is carried to the id the new release raises for its
error and re-verified there (its check's cases against the new guard, its example fix through
`kb check`), and what needs a curator is listed: the worklist."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from kb.errors import Located
from kb.model import Entry, Merged, Problem, ScanResult, Wording
from kb.releases.history import ReleaseDiff, diff_scans
from kb.releases.lineage import Lineage

# what a curator does with an entry, in the worklist's order
REVERIFY, GUARD, GONE, FAILING, KEPT = "re-verify", "guard changed", "gone", "failing", "carried"
# errors users reach without an entry: their reachability (kb/config/resolve.py)
REACHED = ("launch configuration", "request", "model checkpoint")


@dataclass(frozen=True)
class EntryWork:
    path: str
    line: int
    status: str  # REVERIFY, GUARD, GONE, FAILING, KEPT
    old_id: str  # the id the entry is written for
    new_id: Optional[str]  # the id the new release raises for its error (None: gone)
    reasons: tuple[str, ...] = ()
    old_guard: Optional[str] = None
    new_guard: Optional[str] = None
    check_agrees: Optional[bool] = None  # its check's cases against the new guard (None: no check)
    candidates: tuple[tuple[str, str], ...] = ()  # (id, template) for a gone error

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "status": self.status, "oldId": self.old_id,
                "newId": self.new_id, "reasons": list(self.reasons), "oldGuard": self.old_guard,
                "newGuard": self.new_guard, "checkAgrees": self.check_agrees,
                "candidates": [{"id": i, "template": t} for i, t in self.candidates]}


@dataclass(frozen=True)
class NewError:
    id: str
    title: str
    reachability: str
    basis: str
    where: str  # file:line

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "reachability": self.reachability, "basis": self.basis,
                "where": self.where}


@dataclass(frozen=True)
class Worklist:
    old: str
    new: str
    counts: dict[str, int]  # the diff's: added, removed, edited, moved, guard, line
    entries: tuple[EntryWork, ...]
    reports: dict[str, int]  # kept, followed (to a new id), gone, failing (quote no longer matches)
    report_problems: tuple[str, ...]
    new_errors: tuple[NewError, ...]  # reachable by users, added in the new release, no entry yet
    wordings: int = 0  # ids the extended wordings hold
    written: tuple[str, ...] = field(default_factory=tuple)

    def of(self, status: str) -> list[EntryWork]:
        return [e for e in self.entries if e.status == status]

    @property
    def todo(self) -> int:
        """Items for a curator: re-verify, guard changed without an agreeing check, gone, failing."""
        return sum(1 for e in self.entries if e.status != KEPT and not (e.status == GUARD and e.check_agrees))

    def to_json(self) -> dict[str, Any]:
        return {"old": self.old, "new": self.new, "counts": self.counts,
                "entries": {s: [e.to_json() for e in self.of(s)] for s in (REVERIFY, GUARD, GONE, FAILING, KEPT)},
                "reports": self.reports, "reportProblems": list(self.report_problems),
                "newErrors": [n.to_json() for n in self.new_errors], "wordings": self.wordings,
                "todo": self.todo, "written": list(self.written)}


def worklist(old_name: str, new_scan: ScanResult, diff: ReleaseDiff, old_scan: ScanResult, entries: Sequence[Entry],
             merged: Merged, lineage: Lineage, wordings: Sequence[Wording]) -> Worklist:
    """What became of every entry and report (from the merge on the new release with the extended
    history), and the new errors users reach that no entry covers."""
    new_name = diff.new
    landed = {r.entry.path: r for r in merged.records if r.entry is not None}
    problems: dict[str, list[Problem]] = {}
    for p in merged.problems:
        problems.setdefault(p.path, []).append(p)
    failures: dict[str, list[Located]] = {}
    for f in merged.verification:
        failures.setdefault(f.path, []).append(f)
    old_guards = {s.id: s.fact.guard for s in reversed(old_scan.sites)}
    out: list[EntryWork] = []
    for e in entries:
        mine = problems.get(e.path, [])
        record = landed.get(e.path)
        if record is None:
            gone = next((p for p in mine if p.kind in ("removed", "orphan", "newer")), None)
            candidates = tuple((i, r.template) for i in (gone.candidates if gone else ())
                               for r in merged.records if r.id == i)
            out.append(EntryWork(e.path, e.line_of("id"), GONE, e.id, None,
                                 (gone.message,) if gone else (), old_guards.get(e.id), None, None, candidates))
            continue
        new_guard = record.sites[0].fact.guard
        old_guard = e.verified.guard if e.verified is not None else old_guards.get(e.id)
        agrees = None if e.check is None else record.checked
        reasons = tuple(p.message for p in mine if p.kind in ("stale", "carried", "related"))
        failed = tuple(str(f) for f in failures.get(e.path, ()))
        guard_moved = old_guard is not None and old_guard not in (s.fact.guard for s in record.sites)
        if failed and not record.checked:
            status = FAILING
            reasons += failed
        elif any(not w.startswith("guard changed") for w in record.stale):
            status = REVERIFY  # the message changed, it was followed to another id, or the error was removed
        elif guard_moved:
            status = GUARD  # re-verify unless its check agrees with the new guard (then only `verified:` to update)
        else:
            status = KEPT
        out.append(EntryWork(e.path, e.line_of("id"), status, e.id, record.id, reasons, old_guard, new_guard, agrees))
    reports = {"kept": 0, "followed": 0, "gone": 0, "failing": 0}
    for r in merged.records:
        for rep in r.reports:
            reports["kept" if rep.id == r.id else "followed"] += 1
    report_problems = tuple(str(p) for p in merged.problems if p.kind in ("removed", "orphan", "report")
                            and "/reports/" in p.path.replace("\\", "/"))
    for p in merged.problems:
        if "/reports/" in p.path.replace("\\", "/"):
            reports["gone" if p.kind in ("removed", "orphan") else "failing"] += 1
    added = {c.new for c in diff.changes if c.kind == "added"}
    curated = {r.id for r in merged.records if r.entry is not None}
    fresh = []
    for r in merged.records:
        if r.id in added and r.id not in curated and r.setby is not None and r.setby.reachability in REACHED:
            fresh.append(NewError(r.id, r.title, r.setby.reachability, r.setby.basis, f"{r.file}:{r.line}"))
    order = {c: i for i, c in enumerate(REACHED)}
    fresh.sort(key=lambda n: (order[n.reachability], "guard reads" not in n.basis, n.where, n.id))
    return Worklist(old_name, new_name, diff.counts(), tuple(out), reports, report_problems, tuple(fresh),
                    len(wordings))


def diff_of(old: tuple[str, ScanResult], new: tuple[str, ScanResult]) -> ReleaseDiff:
    return diff_scans(old[1], new[1], old[0], new[0])


_PINNED = re.compile(r'^pinned = "[^"]*"$', re.M)
_PUBLISHED = re.compile(r"^published = \[(.*?)\]$", re.M | re.S)


def releases_toml(text: str, version: str) -> str:
    """releases.toml with `version` pinned and appended to the published releases (once)."""
    if not _PINNED.search(text) or not _PUBLISHED.search(text):
        raise ValueError("releases.toml has no `pinned = \"...\"` line or `published = [...]` list")
    text = _PINNED.sub(f'pinned = "{version}"', text, count=1)
    m = _PUBLISHED.search(text)
    assert m is not None
    names = re.findall(r'"([^"]+)"', m.group(1))
    if version not in names:
        names.append(version)
    rows, row = [], "  "
    for name in names:
        item = json.dumps(name) + ", "
        if len(row) + len(item) > 100:
            rows.append(row.rstrip())
            row = "  "
        row += item
    rows.append(row.rstrip())
    return text[:m.start()] + "published = [\n" + "\n".join(rows) + "\n]" + text[m.end():]


def worklist_text(w: Worklist, fmt: str = "text") -> str:
    """The worklist for people: text for a terminal, markdown for a pull request."""
    md = fmt == "markdown"
    c = w.counts
    lines = [("## " if md else "") + f"vLLM {w.old} -> {w.new}: {c['added']} added, {c['removed']} removed, "
             f"{c['edited']} edited, {c['moved']} moved, {c['guard']} with a changed guard"]
    n = {s: len(w.of(s)) for s in (REVERIFY, GUARD, GONE, FAILING, KEPT)}
    lines.append(f"Curated entries: {n[KEPT]} carried as they were, {n[REVERIFY]} to re-verify, {n[GUARD]} whose guard "
                 f"changed, {n[GONE]} whose error is gone, {n[FAILING]} failing on {w.new}.")
    r = w.reports
    lines.append(f"Public reports: {r['kept']} on the same id, {r['followed']} followed to a new id, {r['gone']} on "
                 f"errors {w.new} no longer raises, {r['failing']} whose quote no longer matches.")
    lines.append(f"New errors users reach with no entry yet: {len(w.new_errors)} "
                 f"({', '.join(f'{sum(1 for x in w.new_errors if x.reachability == k)} {k}' for k in REACHED)}).")
    code = (lambda s: f"`{s}`") if md else (lambda s: s)
    for status, label in ((FAILING, "Failing on the new release"), (REVERIFY, "Re-verify"),
                          (GUARD, "Guard changed"), (GONE, "Error gone")):
        items = w.of(status)
        if not items:
            continue
        lines += ["", (f"### {label} ({len(items)})" if md else f"{label} ({len(items)}):")]
        for e in items:
            head = f"{e.path}: {code(e.old_id)}" + (f" -> {code(e.new_id)}" if e.new_id and e.new_id != e.old_id else "")
            lines.append(("- " if md else "  ") + head)
            pad = "  " if md else "      "
            if status == GUARD:
                lines.append(f"{pad}old guard: {code(e.old_guard or '?')}")
                lines.append(f"{pad}new guard: {code(e.new_guard or '?')}")
                if e.check_agrees is not None:
                    lines.append(f"{pad}its check {'agrees' if e.check_agrees else 'does not agree'} with the new guard")
            for why in e.reasons:
                lines.append(f"{pad}{why}")
            for ident, template in e.candidates:
                lines.append(f"{pad}candidate {code(ident)}: {template[:140]}")
    if w.report_problems:
        lines += ["", "### Reports" if md else "Reports:"]
        lines += [("- " if md else "  ") + p for p in w.report_problems]
    if w.new_errors:
        lines += ["", (f"### New errors users reach ({len(w.new_errors)})" if md
                       else f"New errors users reach ({len(w.new_errors)}):")]
        shown = w.new_errors[:60]
        for x in shown:
            lines.append(("- " if md else "  ") + f"{code(x.id)} [{x.reachability}] {x.title} ({x.where})")
        if len(w.new_errors) > len(shown):
            lines.append(("- " if md else "  ") + f"... and {len(w.new_errors) - len(shown)} more (--json lists all)")
    if w.written:
        lines += ["", "Written: " + ", ".join(w.written)]
    return "\n".join(lines) + "\n"
