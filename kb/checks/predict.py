"""Runnable constraint checks: predict from a launch configuration which errors vLLM raises,
and prove every check against vLLM's own guard (cross-validation) and its own cases."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from kb.entries.load import Check, Located
from kb.checks.evaluate import ExprError, MissingInput, evaluate, parse, substitute
from kb.checks.launch import Launch, command_words, parse_launch
from kb.model import Record, Site
from kb.scan.messages import placeholders
from kb.scan.unparse import unparse
from kb.checks.vocab import INPUTS, UNKNOWN


@dataclass(frozen=True)
class Prediction:
    record: Record
    message: str  # the template filled with the launch's values where they are known


@dataclass(frozen=True)
class Skipped:
    record: Record
    missing: tuple[str, ...]


@dataclass(frozen=True)
class Outcome:
    predicted: tuple[Prediction, ...]  # in vLLM's order within a function (by line)
    skipped: tuple[Skipped, ...]
    launch: Launch


def predict(records: Sequence[Record], launch: Launch) -> Outcome:
    predicted: list[Prediction] = []
    skipped: list[Skipped] = []
    for r in records:
        check = r.entry.check if r.entry is not None else None
        if check is None:
            continue
        missing = tuple(i for i in check.inputs if i not in launch.values)
        if missing:
            skipped.append(Skipped(r, missing))
            continue
        if evaluate(check.raises_when, launch.values):
            predicted.append(Prediction(r, fill_message(r, check, launch.values)))
    predicted.sort(key=lambda p: (p.record.file, p.record.line, p.record.id))
    return Outcome(tuple(predicted), tuple(skipped), launch)


def _bindings(check: Check) -> dict[str, ast.expr]:
    out: dict[str, ast.expr] = {}
    for key, value in check.bindings.items():
        node = parse(value) if isinstance(value, str) else ast.Constant(value)
        try:
            key = unparse(ast.parse(key, mode="eval").body)
        except SyntaxError:
            pass
        out[key] = node
    return out


def _locals(site: Site) -> dict[str, ast.expr]:
    out: dict[str, ast.expr] = {}
    for d in site.fact.locals:
        try:
            out[d.name] = ast.parse(d.source, mode="eval").body
        except SyntaxError:
            continue
    return out


def fill_message(r: Record, check: Check, values: Mapping[str, Any]) -> str:
    """Each placeholder evaluated through the bindings and the guard's local definitions;
    one that cannot be evaluated stays as it is."""
    bindings, locals_ = _bindings(check), _locals(r.sites[0])
    text = r.template
    for expr in placeholders(r.template):
        try:
            node = substitute(ast.parse(expr, mode="eval").body, bindings, locals_)
            value = evaluate(node, values)
        except (SyntaxError, ExprError):
            continue
        text = text.replace("{" + expr + "}", str(value), 1)
    return text


def guard_site(r: Record) -> Site:
    """The site the entry was verified against, else the first."""
    e = r.entry
    if e is not None and e.verified is not None:
        for s in r.sites:
            if s.fact.guard == e.verified.guard:
                return s
    return r.sites[0]


def scanned_guard(r: Record, check: Check) -> ast.expr:
    """The scanned guard with the check's bindings and the site's locals substituted."""
    site = guard_site(r)
    guard = site.fact.guard or "True"
    return substitute(ast.parse(guard, mode="eval").body, _bindings(check), _locals(site))


def case_values(check: Check, inputs: Mapping[str, Any]) -> dict[str, Any]:
    values = dict(inputs)
    for name in check.inputs:
        if name not in values:
            default = INPUTS[name].default if name in INPUTS else UNKNOWN
            if default is not UNKNOWN:
                values[name] = default
    return values


def verify_check(r: Record) -> list[Located]:
    """Run every case against raises_when and, unless manual, against the scanned guard."""
    e = r.entry
    assert e is not None and e.check is not None
    check = e.check
    problems: list[Located] = []
    guard: Optional[ast.expr] = None
    if check.source_check != "manual":
        try:
            guard = scanned_guard(r, check)
        except (SyntaxError, ExprError) as err:
            problems.append(Located(e.path, check.line, f"the scanned guard cannot be read: {err}"))
    for case in check.cases:
        values = case_values(check, case.inputs)
        try:
            got = bool(evaluate(check.raises_when, values))
        except MissingInput as err:
            problems.append(Located(e.path, case.line, f"case {err.message} (give it, or it needs a vocabulary default)"))
            continue
        except ExprError as err:
            problems.append(Located(e.path, case.line, f"raises_when fails on this case: {err.message}"))
            continue
        if got != case.raises:
            problems.append(Located(e.path, case.line, f"case says raises: {str(case.raises).lower()}, "
                                                        f"but raises_when gives {str(got).lower()}"))
        if guard is not None:
            try:
                by_source = bool(evaluate(guard, values))
            except ExprError as err:
                why = (f"reads {err.name!r}, which no binding or input covers" if isinstance(err, MissingInput)
                       else f"`{guard_site(r).fact.guard}` cannot be evaluated ({err.message})")
                problems.append(Located(e.path, check.line, f"vLLM's guard {why}: bind it in source_bindings, or set "
                                                            f"source_check: manual with a reason"))
                guard = None
                continue
            if by_source != case.raises:
                problems.append(Located(e.path, case.line, f"vLLM's own guard gives {str(by_source).lower()} for this case, "
                                                            f"the case says {str(case.raises).lower()}"))
    return problems


def verify_example_fix(r: Record, records: Sequence[Record]) -> list[Located]:
    """`before` must predict this error, `after` must predict no error at all."""
    e = r.entry
    assert e is not None and e.example_fix is not None and e.check is not None
    fix = e.example_fix
    line = e.line_of("example_fix")
    if fix.language != "shell":
        return [Located(e.path, line, "an entry with a check needs a shell example fix (a `vllm serve` command) "
                                      "so that kb check can run it")]
    problems: list[Located] = []
    for side, text in (("before", fix.before), ("after", fix.after)):
        launch = parse_launch(command_words(text), fix.model_config or None, fix.hardware or None)
        for p in launch.problems:
            problems.append(Located(e.path, e.line_of("example_fix", side), f"example_fix.{side}: {p}"))
        outcome = predict(records, launch)
        ids = [p.record.id for p in outcome.predicted]
        if side == "before" and r.id not in ids:
            missing = next((s.missing for s in outcome.skipped if s.record.id == r.id), ())
            why = f" (missing inputs: {', '.join(missing)})" if missing else ""
            problems.append(Located(e.path, e.line_of("example_fix", side),
                                    f"example_fix.before does not predict this error{why}"))
        if side == "after" and ids:
            problems.append(Located(e.path, e.line_of("example_fix", side),
                                    "example_fix.after still predicts: " + "; ".join(
                                        f"{p.record.id} ({p.message})" for p in outcome.predicted)))
    return problems
