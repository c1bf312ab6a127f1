"""Our own small evaluator for check expressions: Python expression syntax over a whitelist
of node types. Never `eval`/`exec`: anything outside the whitelist is a located error.

Also translates the same expressions to a JSON tree that the site's checker script
interprets with the same semantics (static/check.js), so the page and `kb check` are driven
by one source.
"""

from __future__ import annotations

import ast
import copy
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

from kb.errors import ExprError, MissingInput


def _int(x: Any) -> int:
    return int(x)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min, "max": max, "len": len, "abs": abs, "int": _int, "float": float, "str": str, "bool": bool,
}
_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_CMPOPS: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_, ast.IsNot: operator.is_not,
}
_NAMES = {"+": ast.Add, "-": ast.Sub, "*": ast.Mult, "/": ast.Div, "//": ast.FloorDiv, "%": ast.Mod, "**": ast.Pow}
_OP_SYMBOL = {v: k for k, v in _NAMES.items()}
_CMP_SYMBOL = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
               ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}
MAX_POWER = 64
MAX_REPEAT = 100_000  # longest string or list that `*` may build


def _repeated_length(left: Any, right: Any) -> int:
    """The length `left * right` has when it repeats a string or list, else 0."""
    for seq, count in ((left, right), (right, left)):
        if isinstance(seq, (str, list, tuple)) and isinstance(count, int):
            return len(seq) * max(count, 0)
    return 0


def parse(source: str) -> ast.expr:
    """Parse and check against the whitelist; raises ExprError naming the offending part."""
    try:
        tree = ast.parse(source.strip(), mode="eval").body
    except SyntaxError as e:
        raise ExprError(f"not a Python expression: {e.msg} in {source!r}") from None
    check_whitelist(tree)
    return tree


def check_whitelist(node: ast.AST) -> None:
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            if n.id.startswith("__"):
                raise ExprError(f"dunder names are not allowed: {n.id}")
        elif isinstance(n, ast.Call):
            if not isinstance(n.func, ast.Name) or n.func.id not in FUNCTIONS:
                raise ExprError(f"only calls of {', '.join(sorted(FUNCTIONS))} are allowed: {ast.unparse(n)}")
            if n.keywords or any(isinstance(a, ast.Starred) for a in n.args):
                raise ExprError(f"calls take plain positional arguments only: {ast.unparse(n)}")
        elif isinstance(n, ast.Attribute):
            raise ExprError(f"attribute access is not allowed: {ast.unparse(n)}")
        elif isinstance(n, ast.BinOp):
            if type(n.op) not in _BINOPS:
                raise ExprError(f"operator not allowed: {ast.unparse(n)}")
        elif isinstance(n, ast.Constant):
            if not isinstance(n.value, (int, float, str, bool, type(None))):
                raise ExprError(f"constant not allowed: {ast.unparse(n)}")
        elif not isinstance(n, _ALLOWED):
            raise ExprError(f"{type(n).__name__} is not allowed: {ast.unparse(n) if isinstance(n, ast.expr) else ''}")


_ALLOWED = (ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd, ast.Compare, ast.IfExp,
            ast.List, ast.Tuple, ast.Set, ast.Load, ast.Subscript, ast.Expression, ast.Name, ast.Constant, ast.Call,
            ast.BinOp, *(_CMPOPS.keys()), *(_BINOPS.keys()))


def evaluate(expr: str | ast.expr, env: Mapping[str, Any]) -> Any:
    node = parse(expr) if isinstance(expr, str) else expr
    if not isinstance(expr, str):
        check_whitelist(node)
    try:
        return _eval(node, env)
    except ExprError:
        raise
    except (TypeError, ValueError, ZeroDivisionError, KeyError, IndexError, OverflowError) as e:
        raise ExprError(f"{type(e).__name__}: {e} in {ast.unparse(node)!r}") from None


def _eval(n: ast.expr, env: Mapping[str, Any]) -> Any:
    if isinstance(n, ast.Constant):
        return n.value
    if isinstance(n, ast.Name):
        if n.id in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[n.id]
        if n.id not in env:
            raise MissingInput(n.id)
        return env[n.id]
    if isinstance(n, ast.BoolOp):
        if isinstance(n.op, ast.And):
            value: Any = True
            for v in n.values:
                value = _eval(v, env)
                if not value:
                    return value
            return value
        value = False
        for v in n.values:
            value = _eval(v, env)
            if value:
                return value
        return value
    if isinstance(n, ast.UnaryOp):
        v = _eval(n.operand, env)
        if isinstance(n.op, ast.Not):
            return not v
        return -v if isinstance(n.op, ast.USub) else +v
    if isinstance(n, ast.BinOp):
        left, right = _eval(n.left, env), _eval(n.right, env)
        if isinstance(n.op, ast.Pow) and isinstance(right, (int, float)) and abs(right) > MAX_POWER:
            raise ExprError(f"exponent too large in {ast.unparse(n)!r}")
        if isinstance(n.op, ast.Mod) and isinstance(left, str):  # "%099999999999d" % 1 would fill memory
            raise ExprError(f"string formatting is not allowed: {ast.unparse(n)!r}")
        if isinstance(n.op, ast.Mult) and _repeated_length(left, right) > MAX_REPEAT:
            raise ExprError(f"repetition too long in {ast.unparse(n)!r}")
        return _BINOPS[type(n.op)](left, right)
    if isinstance(n, ast.Compare):
        left = _eval(n.left, env)
        for op, comparator in zip(n.ops, n.comparators):
            right = _eval(comparator, env)
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(n, ast.IfExp):
        return _eval(n.body, env) if _eval(n.test, env) else _eval(n.orelse, env)
    if isinstance(n, (ast.List, ast.Tuple)):
        return [_eval(e, env) for e in n.elts] if isinstance(n, ast.List) else tuple(_eval(e, env) for e in n.elts)
    if isinstance(n, ast.Set):
        return {_eval(e, env) for e in n.elts}
    if isinstance(n, ast.Subscript):
        return _eval(n.value, env)[_eval(n.slice, env)]
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
        return FUNCTIONS[n.func.id](*(_eval(a, env) for a in n.args))
    raise ExprError(f"{type(n).__name__} is not allowed")


def names_of(expr: str | ast.expr) -> list[str]:
    node = parse(expr) if isinstance(expr, str) else expr
    out: list[str] = []
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id not in FUNCTIONS and n.id not in ("True", "False", "None") and n.id not in out:
            out.append(n.id)
    return out


# --- the site's checker: the same expression as a JSON tree ---------------------------------------
def to_tree(expr: str | ast.expr) -> Any:
    """A JSON tree of a whitelisted expression, interpreted by static/check.js."""
    n = parse(expr) if isinstance(expr, str) else expr
    if isinstance(n, ast.Constant):
        if isinstance(n.value, float) and not math.isfinite(n.value):
            raise ExprError("non-finite constant")
        return ["const", n.value]
    if isinstance(n, ast.Name):
        if n.id in ("True", "False", "None"):
            return ["const", {"True": True, "False": False, "None": None}[n.id]]
        return ["name", n.id]
    if isinstance(n, ast.BoolOp):
        return ["and" if isinstance(n.op, ast.And) else "or", [to_tree(v) for v in n.values]]
    if isinstance(n, ast.UnaryOp):
        return [{ast.Not: "not", ast.USub: "neg", ast.UAdd: "pos"}[type(n.op)], to_tree(n.operand)]
    if isinstance(n, ast.BinOp):
        return ["bin", _OP_SYMBOL[type(n.op)], to_tree(n.left), to_tree(n.right)]
    if isinstance(n, ast.Compare):
        return ["cmp", to_tree(n.left), [[_CMP_SYMBOL[type(o)], to_tree(c)] for o, c in zip(n.ops, n.comparators)]]
    if isinstance(n, ast.IfExp):
        return ["if", to_tree(n.test), to_tree(n.body), to_tree(n.orelse)]
    if isinstance(n, (ast.List, ast.Tuple, ast.Set)):
        return ["list", [to_tree(e) for e in n.elts]]
    if isinstance(n, ast.Subscript):
        return ["item", to_tree(n.value), to_tree(n.slice)]
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
        return ["call", n.func.id, [to_tree(a) for a in n.args]]
    raise ExprError(f"{type(n).__name__} is not allowed")


def readable(expr: str) -> str:
    """The condition as people read it (normalised source)."""
    from kb.scan.unparse import unparse

    return unparse(parse(expr))


def substitute(guard: ast.expr, bindings: Mapping[str, ast.expr], locals_: Mapping[str, ast.expr],
               depth: int = 0) -> ast.expr:
    """The scanned guard with every sub-expression named in `bindings` (by its source text)
    replaced by the binding, and other names replaced by their local definitions."""
    from kb.scan.unparse import unparse

    class _Swap(ast.NodeTransformer):
        def visit(self, node: ast.AST) -> Any:
            if isinstance(node, ast.expr):
                key = unparse(node)
                if key in bindings:
                    return bindings[key]
                if isinstance(node, ast.Name) and node.id in locals_ and depth < 6:
                    return substitute(locals_[node.id], bindings, locals_, depth + 1)
            return super().visit(node)

    swapped = _Swap().visit(copy.deepcopy(guard))
    assert isinstance(swapped, ast.expr)
    return swapped

