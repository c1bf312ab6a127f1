"""`kb check` output: text for people, JSON for programs. Pure functions."""

from __future__ import annotations

import json
from typing import Any, Optional

from kb.checks.predict import Outcome


def page_url(ident: str, site_url: Optional[str]) -> str:
    return f"{site_url.rstrip('/')}/errors/{ident}/" if site_url else f"/errors/{ident}/"


def outcome_json(outcome: Outcome, site_url: Optional[str] = None) -> str:
    data: dict[str, Any] = {
        "predicted": [
            {"id": p.record.id, "class": p.record.exception_class, "file": p.record.file, "line": p.record.line,
             "function": p.record.sites[0].fact.qualname, "message": p.message, "template": p.record.template,
             "firstSolution": p.record.entry.solutions[0] if p.record.entry and p.record.entry.solutions else None,
             "url": page_url(p.record.id, site_url)}
            for p in outcome.predicted],
        "skipped": [{"id": s.record.id, "missing": list(s.missing)} for s in outcome.skipped],
        "ignoredFlags": list(outcome.launch.ignored_flags),
        "problems": list(outcome.launch.problems),
        "notRun": [{"id": n.record.id, "reason": n.reason} for n in outcome.not_run],
        "model": outcome.launch.model,
        "parseError": None if outcome.parse_error is None else {
            "stage": outcome.parse_error.stage, "message": outcome.parse_error.printed,
            "option": outcome.parse_error.option, "exact": outcome.parse_error.exact},
    }
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def outcome_text(outcome: Outcome, site_url: Optional[str] = None) -> str:
    lines: list[str] = []
    n = len(outcome.predicted)
    stop = outcome.parse_error
    if stop is not None:
        lines += ["vLLM stops while reading the command line, before it builds any config:",
                  f"    {stop.printed}"]
        if not stop.exact:
            lines.append("    (vLLM's own words differ: they name a function or pydantic's report; kb predicts "
                         "the error, not its exact text)")
        if n:
            lines += ["", f"After you fix it, {n} error{'s' if n > 1 else ''} predicted for this launch:"]
    elif n:
        lines.append(f"{n} error{'s' if n > 1 else ''} predicted for this launch:")
    else:
        lines.append("No error predicted by the checks whose inputs are known.")
    functions: dict[tuple[str, str], int] = {}
    for p in outcome.predicted:
        key = (p.record.file, p.record.sites[0].fact.qualname)
        functions[key] = functions.get(key, 0) + 1
    for p in outcome.predicted:
        r = p.record
        lines += ["", f"  {r.id}  {r.exception_class}  {r.file}:{r.line}  ({r.sites[0].fact.qualname})",
                  f"    {p.message}"]
        if r.entry is not None and r.entry.solutions:
            lines.append(f"    First fix: {r.entry.solutions[0]}")
        lines.append(f"    {page_url(r.id, site_url)}")
    if any(count > 1 for count in functions.values()):
        lines += ["", "  Errors checked in the same function are raised in this order: vLLM stops at the first, "
                      "the next appears once it is fixed."]
    if outcome.skipped:
        lines += ["", f"{len(outcome.skipped)} check(s) skipped for missing inputs:"]
        by_missing: dict[tuple[str, ...], list[str]] = {}
        for s in outcome.skipped:
            by_missing.setdefault(s.missing, []).append(s.record.id)
        for missing, ids in sorted(by_missing.items()):
            lines.append(f"  needs {', '.join(missing)}: {', '.join(ids)}")
    if outcome.not_run:
        lines += ["", f"{len(outcome.not_run)} check(s) not run:"]
        lines += [f"  {n.record.id}: {n.reason}" for n in outcome.not_run]
    if outcome.launch.ignored_flags:
        lines += ["", "Flags no check reads (ignored): " + " ".join(outcome.launch.ignored_flags)]
    if outcome.launch.problems:
        lines += ["", "Bad input (the checks that need it did not run):"]
        lines += [f"  {problem}" for problem in outcome.launch.problems]
    return "\n".join(lines) + "\n"
