"""Runnable constraint checks: predict from a launch configuration which errors vLLM raises."""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from kb.checks.cli_parse import ParseError
from kb.checks.evaluate import evaluate, parse, substitute
from kb.checks.launch import Launch
from kb.checks.modelconfig import ConfigSource
from kb.checks.order import ValidationFailure, position
from kb.errors import ExprError, MissingInput
from kb.model import Check, RaiseSite, Record
from kb.scan.messages import placeholders
from kb.scan.unparse import unparse


@dataclass(frozen=True)
class Prediction:
    """An error the launch would raise."""

    record: Record
    message: str  # the template filled with the launch's values where they are known


@dataclass(frozen=True)
class Skipped:
    """A check that could not run: the launch does not give these inputs."""

    record: Record
    missing: tuple[str, ...]


@dataclass(frozen=True)
class NotRun:
    """A check that could not run: an input it needs is bad, or its condition fails on these
    values (e.g. a division by zero)."""

    record: Record
    reason: str
    error: str = ""  # when its condition failed: the evaluator's message alone


@dataclass(frozen=True)
class Outcome:
    """What `kb check` found for one launch."""

    predicted: tuple[Prediction, ...]  # in vLLM's order within a function (by line)
    skipped: tuple[Skipped, ...]
    launch: Launch
    not_run: tuple[NotRun, ...] = ()
    parse_error: Optional[ParseError] = None  # vLLM exits while reading the command line, before any check
    validation: tuple[ValidationFailure, ...] = ()  # configs whose pydantic constraints the flags break
    build_order: tuple[tuple[str, int], ...] = ()  # of the release (kb.config.order): sorts what comes first
    valid: dict[str, dict[str, list[Any]]] = field(default_factory=dict)  # id -> flag -> values passing every check
    unknown: tuple[Skipped, ...] = ()  # derived checks the launch does not give the inputs of (kb/checks/derive.py)
    config: Optional[ConfigSource] = None  # which config.json was read, or where kb looked (kb check)
    release: Optional[str] = None  # the release checked against (its pages' links name it), when it is one

    @property
    def errors(self) -> int:
        return len(self.predicted) + len(self.validation) + (self.parse_error is not None)

    def in_order(self) -> list[ValidationFailure | Prediction]:
        """Everything predicted after the command line is read, in the order vLLM meets it."""
        order = dict(self.build_order)
        events: list[tuple[tuple[float, int, str, int], ValidationFailure | Prediction]] = [
            ((v.built_at, 0, "", 0), v) for v in self.validation]
        events += [(position(p.record, order), p) for p in self.predicted]
        return [e for _, e in sorted(events, key=lambda e: e[0])]

    @property
    def judged(self) -> bool:
        """No check that could raise was left undecided for an input the launch does not give."""
        return not self.skipped

    @property
    def complete(self) -> bool:
        """Every input was read and every check whose inputs are known ran."""
        return not self.launch.problems and not self.not_run


def predict(records: Sequence[Record], launch: Launch, messages: bool = True) -> Outcome:
    """Each check on its own: one that cannot run is reported, the others still run. Without
    `messages`, the predictions keep the template unfilled (trials that only ask which raise)."""
    predicted: list[Prediction] = []
    skipped: list[Skipped] = []
    not_run: list[NotRun] = []
    for r in records:
        check = r.entry.check if r.entry is not None else None
        if check is None:
            continue
        bad = [i for i in check.inputs if i in launch.bad]
        if bad:
            not_run.append(NotRun(r, "bad input " + ", ".join(bad)))
            continue
        missing = tuple(i for i in check.inputs if i not in launch.values)
        try:  # an input the launch does not give matters only where the condition reaches it
            raises = bool(evaluate(check.raises_when, launch.values))
        except MissingInput:
            skipped.append(Skipped(r, missing))
            continue
        except ExprError as e:
            not_run.append(NotRun(r, f"its condition fails on these values: {e}", str(e)))
            continue
        if raises:
            predicted.append(Prediction(r, fill_message(r, check, launch.values) if messages else r.template))
    predicted.sort(key=lambda p: (p.record.file, p.record.line, p.record.id))
    return Outcome(tuple(predicted), tuple(skipped), launch, tuple(not_run))


def bindings_of(check: Check) -> dict[str, ast.expr]:
    out: dict[str, ast.expr] = {}
    for key, value in check.bindings.items():
        node = parse(value) if isinstance(value, str) else ast.Constant(value)
        with contextlib.suppress(SyntaxError):
            key = unparse(ast.parse(key, mode="eval").body)
        out[key] = node
    return out


def locals_of(site: RaiseSite) -> dict[str, ast.expr]:
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
    bindings, locals_ = bindings_of(check), locals_of(r.sites[0])
    text = r.template
    for expr in placeholders(r.template):
        try:
            node = substitute(ast.parse(expr, mode="eval").body, bindings, locals_)
            shown = str(evaluate(node, values))
        except (SyntaxError, ExprError, RecursionError, ValueError):  # ValueError: an integer too long to print
            continue
        text = text.replace("{" + expr + "}", shown, 1)
    return text
