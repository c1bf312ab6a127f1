"""Runnable constraint checks: predict from a launch configuration which errors vLLM raises."""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kb.checks.evaluate import evaluate, parse, substitute
from kb.checks.launch import Launch
from kb.errors import ExprError
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
class Failed:
    """A check whose condition cannot be evaluated for this launch (`x // 0`, a value too large)."""

    record: Record
    message: str


@dataclass(frozen=True)
class Outcome:
    """What `kb check` found for one launch."""

    predicted: tuple[Prediction, ...]  # in vLLM's order within a function (by line)
    skipped: tuple[Skipped, ...]
    launch: Launch
    failed: tuple[Failed, ...] = ()


def predict(records: Sequence[Record], launch: Launch) -> Outcome:
    predicted: list[Prediction] = []
    skipped: list[Skipped] = []
    failed: list[Failed] = []
    for r in records:
        check = r.entry.check if r.entry is not None else None
        if check is None:
            continue
        missing = tuple(i for i in check.inputs if i not in launch.values)
        if missing:
            skipped.append(Skipped(r, missing))
            continue
        try:
            raises = evaluate(check.raises_when, launch.values)
        except ExprError as e:
            failed.append(Failed(r, e.message))
            continue
        if raises:
            predicted.append(Prediction(r, fill_message(r, check, launch.values)))
    predicted.sort(key=lambda p: (p.record.file, p.record.line, p.record.id))
    return Outcome(tuple(predicted), tuple(skipped), launch, tuple(failed))


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
            value = evaluate(node, values)
        except (SyntaxError, ExprError, RecursionError):
            continue
        text = text.replace("{" + expr + "}", str(value), 1)
    return text
