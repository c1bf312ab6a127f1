"""Public reports (errors/reports/*.yaml) on the records of the errors they quote.

A report counts only where its quote is its error's message: the quote is matched against the
record's template, the way `kb explain` matches a paste. A report written for an id that became
an alias follows to the current id, as a curated entry does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from kb.explain.match import quotes_template
from kb.model import Record, Report
from kb.records.merge import Problem

MAX_REPORTS = 8  # shown per error, and read by search: the first ones by URL


def attach_reports(records: Sequence[Record], reports: Sequence[Report], release: str,
                   aliases: Mapping[str, tuple[str, str, str]]) -> tuple[list[Record], list[Problem]]:
    by_id = {r.id: r for r in records}
    found: dict[str, list[Report]] = {}
    problems: list[Problem] = []
    for rep in reports:
        target = rep.id if rep.id in by_id or rep.id not in aliases else aliases[rep.id][0]
        record = by_id.get(target)
        if record is None:
            problems.append(Problem(rep.path, rep.line, f"report {rep.url}: id {rep.id} is not raised in {release}",
                                    "orphan"))
            continue
        if not quotes_template(record.template, rep.quote):
            problems.append(Problem(rep.path, rep.line, f"report {rep.url}: its quote is not the message of {target} "
                                                        f"({record.template[:120]!r})", "report"))
            continue
        mine = found.setdefault(target, [])
        if all(r.url != rep.url for r in mine):
            mine.append(rep)
    out = [replace(r, reports=tuple(sorted(found[r.id], key=lambda x: x.url)[:MAX_REPORTS])) if r.id in found else r
           for r in records]
    return out, problems
