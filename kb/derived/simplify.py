"""A condition with what is constant in it worked out, so that it reads as what a user decides:
`not (True is not None and False) and _v0` is `_v0`. The constant parts are computed by kb's own
evaluator (kb/checks/evaluate.py), never `eval`."""

from __future__ import annotations

import ast
import copy
from collections.abc import Mapping
from typing import Any

from kb.checks.evaluate import evaluate
from kb.errors import ExprError

_PLAIN = (int, float, str, bool, type(None), tuple, frozenset, list, set)
_MISSING = object()
_NAMED = {"True": True, "False": False, "None": None}


def simplify(node: ast.expr, constants: Mapping[str, Any]) -> ast.expr:
    """The condition `node` (not changed) with the names of `constants` replaced by their values and
    every part that reads no other name computed. Read as a condition: only its truth is kept."""
    return _Fold(constants).truth(copy.deepcopy(node))


class _SortedSet(set[Any]):
    """A computed set, written with its items in a fixed order: a set's own order follows the
    string hashes, which change with every run (the same input would read differently)."""

    def __repr__(self) -> str:
        return "{" + ", ".join(sorted(map(repr, self))) + "}" if self else "set()"


class _SortedFrozenset(frozenset[Any]):
    def __repr__(self) -> str:
        return "frozenset({" + ", ".join(sorted(map(repr, self))) + "})" if self else "frozenset()"


def _shown(value: Any) -> Any:
    """`value`, a set written in a fixed order (ast.unparse and the words write a constant's repr)."""
    if type(value) is set:
        return _SortedSet(value)
    if type(value) is frozenset:
        return _SortedFrozenset(value)
    return value


def _const(node: ast.AST) -> Any:
    return node.value if isinstance(node, ast.Constant) else _MISSING


def _computed(node: ast.expr) -> Any:
    """The value of a part without names, or _MISSING."""
    if any(isinstance(n, ast.Name) and n.id not in _NAMED for n in ast.walk(node)):
        return _MISSING
    try:
        value = evaluate(ast.fix_missing_locations(node), {}, derived=True)
    except (ExprError, RecursionError, ValueError):
        return _MISSING
    return value if isinstance(value, _PLAIN) else _MISSING


def boolean(node: ast.expr) -> bool:
    """Written so that its value is True or False: a comparison, `not`, `and`/`or` of those, a call of
    any, all, isinstance or bool."""
    if isinstance(node, ast.Compare) or (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)):
        return True
    if isinstance(node, ast.BoolOp):
        return all(boolean(v) for v in node.values)
    if isinstance(node, ast.Constant):
        return isinstance(node.value, bool)
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
        "any", "all", "isinstance", "bool")


class _Fold:
    def __init__(self, constants: Mapping[str, Any]) -> None:
        self.constants = constants

    def truth(self, node: ast.expr) -> ast.expr:
        """`node` read for its truth only."""
        if isinstance(node, ast.BoolOp):
            absorbing = isinstance(node.op, ast.Or)  # True absorbs `or`, False absorbs `and`
            kept: list[ast.expr] = []
            for v in node.values:
                v = self.truth(v)
                c = _const(v)
                if c is not _MISSING:
                    if bool(c) == absorbing:
                        return ast.Constant(absorbing)
                    continue  # neutral
                if isinstance(v, ast.BoolOp) and type(v.op) is type(node.op):
                    kept.extend(v.values)
                else:
                    kept.append(v)
            if not kept:
                return ast.Constant(not absorbing)
            return kept[0] if len(kept) == 1 else ast.BoolOp(node.op, kept)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            operand = self.truth(node.operand)
            c = _const(operand)
            if c is not _MISSING:
                return ast.Constant(not c)
            if isinstance(operand, ast.UnaryOp) and isinstance(operand.op, ast.Not):
                return operand.operand
            return ast.UnaryOp(ast.Not(), operand)
        if isinstance(node, ast.IfExp):
            test = self.truth(node.test)
            c = _const(test)
            if c is not _MISSING:
                return self.truth(node.body if c else node.orelse)
            body, orelse = self.truth(node.body), self.truth(node.orelse)
            b, o = _const(body), _const(orelse)
            if b is not _MISSING and o is not _MISSING:
                if bool(b) == bool(o):
                    return ast.Constant(bool(b))
                return test if b else ast.UnaryOp(ast.Not(), test)
            return ast.IfExp(test, body, orelse)
        out = self.value(node)
        c = _const(out)
        return ast.Constant(bool(c)) if c is not _MISSING else out

    def value(self, node: ast.expr) -> ast.expr:
        """`node` read for its value."""
        if isinstance(node, ast.Name):
            if node.id in self.constants:
                return ast.Constant(_shown(self.constants[node.id]))
            if node.id in _NAMED:
                return ast.Constant(_NAMED[node.id])
            return node
        if isinstance(node, ast.Compare):
            left = self.value(node.left)
            comparators = [self.value(c) for c in node.comparators]
            out = ast.Compare(left, node.ops, comparators)
            value = _computed(out)
            if value is not _MISSING:
                return ast.Constant(bool(value))
            # `(True if c else None) is not None`: the test itself, or its negation
            if isinstance(left, ast.IfExp) and len(node.ops) == 1 and _const(left.body) is not _MISSING and \
                    _const(left.orelse) is not _MISSING and _const(comparators[0]) is not _MISSING:
                yes = _computed(ast.Compare(left.body, node.ops, comparators))
                no = _computed(ast.Compare(left.orelse, node.ops, comparators))
                if yes is not _MISSING and no is not _MISSING:
                    if bool(yes) == bool(no):
                        return ast.Constant(bool(yes))
                    test = self.truth(left.test)
                    return test if yes else ast.UnaryOp(ast.Not(), test)
            return out
        if isinstance(node, ast.IfExp):
            test = self.truth(node.test)
            c = _const(test)
            if c is not _MISSING:
                return self.value(node.body if c else node.orelse)
            return ast.IfExp(test, self.value(node.body), self.value(node.orelse))
        if isinstance(node, ast.BoolOp):  # a value: `x or 1` is x when x is truthy
            values = [self.value(v) for v in node.values]
            while len(values) > 1 and _const(values[0]) is not _MISSING:
                c = _const(values[0])
                if bool(c) == isinstance(node.op, ast.Or):
                    return values[0]
                values = values[1:]
            return values[0] if len(values) == 1 else ast.BoolOp(node.op, values)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return self.truth(node)
        if isinstance(node, (ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.Lambda, ast.DictComp)):
            return node  # their own names: kept as written
        for name, field in ast.iter_fields(node):
            if isinstance(field, ast.expr):
                setattr(node, name, self.value(field))
            elif isinstance(field, list):
                setattr(node, name, [self.value(f) if isinstance(f, ast.expr) else f for f in field])
        value = _computed(node)
        return ast.Constant(_shown(value)) if value is not _MISSING else node
