"""Names traced to their assignments: a guard's or a message's local, read where the raise reads
it (an assignment in the other branch of an `if` does not reach it; one in a loop, `try` or `with`
is conditional), `self.x` of a method, the parts a list of messages is built from."""

from __future__ import annotations

import ast
import builtins
import copy
from dataclasses import dataclass, field
from typing import Optional

from kb.model import LocalDef
from kb.scan.limits import (
    DEEP,
    MAX_NESTING,
    FuncNode,
    Unscannable,
    bounded,
    short,
)
from kb.scan.messages import template_of
from kb.scan.unparse import unparse

_BUILTIN_NAMES = frozenset(dir(builtins)) | {"self", "cls"}
_MAX_LOCAL_DEPTH = 3


Branches = tuple[tuple[int, int], ...]  # (id of an `if`, 0 for its body or 1 for its else), outermost first


@dataclass
class _Assignment:
    line: int
    value: ast.expr
    augmented: bool  # `+=`
    branches: Branches = ()


def reaches(a: _Assignment, path: Optional[Branches]) -> bool:
    """False when the assignment is in one branch of an `if` and `path` (where the name is read)
    in the other: `if x is None: x = 1` / `elif x > 2: raise` never sees that `x = 1`."""
    if path is None:
        return True
    taken = dict(path)
    return all(taken.get(node, branch) == branch for node, branch in a.branches)


@dataclass
class NameScope:
    """A function (or the module) whose simple assignments are used to trace names."""

    node: Optional[FuncNode]
    assignments: dict[str, list[_Assignment]] = field(default_factory=dict)
    appended: dict[str, list[_Assignment]] = field(default_factory=dict)  # `name.append(x)`: the parts of a list
    collected: bool = False


# --- tracing names to their assignments -------------------------------------------------------
# Blocks whose statements may not run (loops, `try`, `with`, `match`): an assignment inside one is
# conditional for a raise outside it (LocalDef.conditional); the walker's path holds those around the raise.
BLOCKS = (ast.For, ast.AsyncFor, ast.While, ast.Try, ast.TryStar, ast.With, ast.AsyncWith, ast.Match)


def collect_assignments(body: list[ast.stmt], scope: NameScope) -> None:
    """Simple `name = value`, `name: T = value` and `name += value` statements, in line order.

    Nested functions and classes are not entered; at module level only top-level statements
    and those in module-level `if`/`try` blocks count.
    """
    stack: list[tuple[ast.AST, Branches]] = [(s, ()) for s in reversed(body)]
    while stack:
        node, path = stack.pop()
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    scope.assignments.setdefault(target.id, []).append(
                        _Assignment(node.lineno, node.value, False, path))
        elif isinstance(node, ast.AnnAssign) and node.value is not None and isinstance(node.target, ast.Name):
            scope.assignments.setdefault(node.target.id, []).append(_Assignment(node.lineno, node.value, False, path))
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and isinstance(node.op, ast.Add):
            scope.assignments.setdefault(node.target.id, []).append(_Assignment(node.lineno, node.value, True, path))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        elif (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and node.value.args
              and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "append"
              and isinstance(node.value.func.value, ast.Name)):
            scope.appended.setdefault(node.value.func.value.id, []).append(
                _Assignment(node.lineno, node.value.args[0], False, path))
        else:
            for attr in ("body", "orelse", "finalbody", "handlers", "cases"):
                children = getattr(node, attr, None)
                if children and isinstance(children, list):
                    inner = (*path, (id(node), int(attr == "orelse"))) if isinstance(node, ast.If) else \
                        (*path, (id(node), -1)) if isinstance(node, BLOCKS) else path
                    stack.extend((c, inner) for c in reversed(children)
                                 if isinstance(c, (ast.stmt, ast.excepthandler, ast.match_case)))
    for assignments in scope.assignments.values():
        assignments.sort(key=lambda a: a.line)


def joined_parts(message: Optional[ast.expr], scope: NameScope, resolve: Resolver, line: int) -> tuple[str, ...]:
    """`" ".join(errors)` where `errors` is a list built before the raise (`errors = [...]`,
    `errors.append(f"...")`): the template of each part, each matchable on its own."""
    if (isinstance(message, ast.JoinedStr) and len(message.values) == 1
            and isinstance(message.values[0], ast.FormattedValue)):  # f"{' '.join(errors)}"
        message = message.values[0].value
    if not (isinstance(message, ast.Call) and isinstance(message.func, ast.Attribute)
            and message.func.attr == "join" and isinstance(message.func.value, ast.Constant)
            and isinstance(message.func.value.value, str) and len(message.args) == 1
            and isinstance(message.args[0], ast.Name)):
        return ()
    name = message.args[0].id
    items: list[ast.expr] = []
    bound = _binding(scope, name, line)
    if isinstance(bound, (ast.List, ast.Tuple)):
        items += bound.elts
    items += [a.value for a in scope.appended.get(name, []) if a.line < line]
    out = [template_of(bounded(item), resolve).text for item in items]
    return tuple(dict.fromkeys(t for t in out if t.strip()))


def _binding(scope: NameScope, name: str, before: int, hops: int = 0,
             path: Optional[Branches] = None) -> Optional[ast.expr]:
    """The expression `name` holds just before line `before` (read on the `path` of branches
    when given), folding `+=` into `+` (Unscannable when that nests deeper than MAX_NESTING)."""
    history = [a for a in scope.assignments.get(name, ()) if a.line < before and reaches(a, path)]
    if not history:
        return None
    start = max((i for i, a in enumerate(history) if not a.augmented), default=None)
    if start is None:
        return None
    if len(history) - start > MAX_NESTING:
        raise Unscannable(DEEP)
    value = _substitute_self(history[start].value, name, scope, history[start].line, hops, path)
    for a in history[start + 1 :]:
        value = ast.BinOp(left=value, op=ast.Add(), right=a.value)
    return bounded(value)


def _substitute_self(value: ast.expr, name: str, scope: NameScope, line: int, hops: int,
                     path: Optional[Branches] = None) -> ast.expr:
    """`msg = msg + "..."`: replace the inner `msg` by what it held before that line."""
    if not any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(value)):
        return value
    if hops >= MAX_NESTING:
        raise Unscannable(DEEP)
    earlier = _binding(scope, name, line, hops + 1, path)
    if earlier is None:
        return value

    replacement: ast.expr = earlier

    class _Swap(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.expr:
            return replacement if node.id == name else node

    swapped = _Swap().visit(copy.deepcopy(value))
    assert isinstance(swapped, ast.expr)
    return swapped


class Resolver:
    """Resolves a name at a raise: the function's own assignments first, then module constants."""

    def __init__(self, scope: NameScope, module_scope: NameScope, line: int) -> None:
        self.scope, self.module_scope, self.line = scope, module_scope, line

    def __call__(self, name: str) -> Optional[ast.expr]:
        if self.scope is not self.module_scope:
            if name in self.scope.assignments:
                return _binding(self.scope, name, self.line)
            if is_parameter(self.scope.node, name):
                return None
        value = _binding(self.module_scope, name, 10**9 if self.scope is not self.module_scope else self.line)
        if value is not None and is_text(value):
            return value
        return None


def is_text(value: ast.expr) -> bool:
    """Module constants are followed only when they build text (not e.g. a compiled regex)."""
    return isinstance(value, (ast.Constant, ast.JoinedStr, ast.BinOp)) or (
        isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "format"
    )


def is_parameter(fn: Optional[FuncNode], name: str) -> bool:
    if fn is None:
        return False
    a = fn.args
    params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    if a.vararg:
        params.append(a.vararg)
    if a.kwarg:
        params.append(a.kwarg)
    return any(p.arg == name for p in params)


def guard_reads(terms: list[ast.expr], scope: NameScope, module_scope: NameScope, line: int,
                 path: Optional[Branches] = None) -> tuple[tuple[LocalDef, ...], list[str]]:
    """Assignments before the raise (on its `path` of branches, when given) of the names the
    guard reads, and of the names those read; and every name read along the way, in the order
    first read."""
    frontier = _read_names(terms)
    reads = list(frontier)
    if not terms or scope is module_scope:
        return (), reads
    found: dict[str, LocalDef] = {}
    for _ in range(_MAX_LOCAL_DEPTH):
        following: list[str] = []
        for name in frontier:
            if name not in reads:
                reads.append(name)
            if name in found:
                continue
            history = [a for a in scope.assignments.get(name, ())
                       if a.line < line and not a.augmented and reaches(a, path)]
            if not history:
                continue
            last = history[-1]
            value = last.value
            try:  # `x = x.lower()`: the x it reads is what x held before
                value = _substitute_self(value, name, scope, last.line, 0, path)
                text = short(unparse(bounded(value)))
            except Unscannable:
                value = last.value
                text = short(unparse(bounded(value)))
            taken = dict(path) if path is not None else {}
            # conditional: in a block that does not enclose the raise, or assigned again after a
            # condition that reads it (that condition reads the earlier value)
            conditional = any(node not in taken for node, _ in last.branches) or (
                len(history) > 1 and any(getattr(t, "lineno", line) < last.line for t in terms))
            found[name] = LocalDef(name, text, last.line, conditional)
            following.extend(_read_names([value]))
        frontier = following
    reads += [n for n in frontier if n not in reads]
    return tuple(sorted(found.values(), key=lambda d: (d.line, d.name))), reads


def _read_names(nodes: list[ast.expr]) -> list[str]:
    seen: list[str] = []
    for node in nodes:
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and n.id not in _BUILTIN_NAMES and n.id not in seen:
                seen.append(n.id)
    return seen
