"""Calls of a file's own functions, found in the same file, and what each passes for a parameter.

A guard that reads a parameter (`if dtype not in _STR_DTYPE_TO_TORCH_DTYPE`) says nothing about
what users set until the call is followed (`_get_and_verify_dtype(..., self.dtype, ...)`). The
index is built lazily: one text search finds the lines that write `name(` for every name, and
for a function only the subtrees holding its lines are walked; calls are matched to a
definition by name, and to a method only through `self`, `cls` or its class's name, so a method
of another class with the same name is never taken for it. Calls from other files are not
followed: the scan reads one file at a time.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Optional, Union

FuncNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]
MAX_CALLS = 4  # calls of one function followed, the first in the file
_CALLED = re.compile(rb"\b([A-Za-z_]\w*)\s*\(")


@dataclass(frozen=True)
class CallSite:
    call: ast.Call
    function: Optional[FuncNode]  # the function the call is in; None at module level
    qualname: str  # of that function, `<module>` at module level


@dataclass(frozen=True)
class _Def:
    node: FuncNode
    owner: str  # the class it is a method of, else ""


@dataclass(frozen=True)
class _Children:
    """A node's children with line numbers, sorted by first line, and those without."""

    nodes: tuple[ast.AST, ...]
    starts: tuple[int, ...]
    ends: tuple[int, ...]
    reach: tuple[int, ...]  # the largest last line among nodes[:k + 1]: no earlier child reaches past it
    unlined: tuple[ast.AST, ...]

    @staticmethod
    def of(node: ast.AST) -> _Children:
        lined: list[tuple[int, int, ast.AST]] = []
        unlined: list[ast.AST] = []
        for child in ast.iter_child_nodes(node):
            first, last = getattr(child, "lineno", None), getattr(child, "end_lineno", None)
            if first is None or last is None:
                unlined.append(child)
            else:
                lined.append((first, last, child))
        lined.sort(key=lambda t: t[0])
        reach, top = [], 0
        for _, last, _ in lined:
            top = max(top, last)
            reach.append(top)
        return _Children(tuple(c for _, _, c in lined), tuple(f for f, _, _ in lined), tuple(e for _, e, _ in lined),
                         tuple(reach), tuple(unlined))


class CallIndex:
    def __init__(self, module: ast.Module, data: bytes) -> None:
        self.module = module
        self.data = data
        self._defs: Optional[dict[int, _Def]] = None
        self._written: Optional[dict[bytes, list[int]]] = None  # name -> lines where `name(` is written
        self._calls: dict[str, list[CallSite]] = {}
        self._kids: dict[int, _Children] = {}  # id(node) -> its children by first line

    def _build_defs(self) -> dict[int, _Def]:
        """Every function of the file, and the class it is a method of: statements only."""
        defs: dict[int, _Def] = {}
        stack: list[tuple[ast.AST, str]] = [(self.module, "")]
        while stack:
            node, owner = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                defs[id(node)] = _Def(node, owner)
            inner = node.name if isinstance(node, ast.ClassDef) else ""
            stack.extend((c, inner) for c in statement_children(node))
        return defs

    def _lines_calling(self, name: str) -> list[int]:
        """Lines where `name(` is written (one text search of the file for every name: only the
        subtrees holding those lines are walked)."""
        if self._written is None:
            starts = [0, *(m.end() for m in re.finditer(rb"\n", self.data))]
            written: dict[bytes, set[int]] = {}
            for m in _CALLED.finditer(self.data):
                written.setdefault(m.group(1), set()).add(bisect.bisect_right(starts, m.start()))
            self._written = {k: sorted(v) for k, v in written.items()}
        return self._written.get(name.encode(), [])

    def _calls_named(self, name: str) -> list[CallSite]:
        if name in self._calls:
            return self._calls[name]
        lines = self._lines_calling(name)
        found: list[CallSite] = []
        # (node, qualname parts, enclosing function)
        stack: list[tuple[ast.AST, tuple[str, ...], Optional[FuncNode]]] = [(self.module, (), None)] if lines else []
        while stack:
            node, qual, fn = stack.pop()
            if isinstance(node, ast.Call) and _called_name(node.func) == name:
                found.append(CallSite(node, fn, ".".join(qual) or "<module>"))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qual, fn = (*qual, node.name), node
            elif isinstance(node, ast.ClassDef):
                qual = (*qual, node.name)
            stack.extend((child, qual, fn) for child in self._children_on(node, lines))
        self._calls[name] = found
        return found

    def _children_on(self, node: ast.AST, lines: list[int]) -> list[ast.AST]:
        """The children of `node` that span one of `lines` (or have no lines), found by bisection in
        the node's children sorted by first line: a module of thousands of functions is not walked
        child by child for every name looked up (which made the scan quadratic in its functions)."""
        kids = self._kids.get(id(node))
        if kids is None:
            kids = self._kids[id(node)] = _Children.of(node)
        first, last = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
        lo = 0 if first is None else bisect.bisect_left(lines, first)
        hi = len(lines) if last is None else bisect.bisect_right(lines, last)
        picked: set[int] = set()
        for line in lines[lo:hi]:
            k = bisect.bisect_right(kids.starts, line) - 1
            while k >= 0 and kids.reach[k] >= line:
                if kids.ends[k] >= line:
                    picked.add(k)
                k -= 1
        return [*kids.unlined, *(kids.nodes[k] for k in sorted(picked))]

    def calls_of(self, fn: FuncNode) -> list[tuple[CallSite, bool]]:
        """Calls of `fn` in this file, in line order, each with whether the call passes its first
        parameter implicitly (a method called through `self`, `cls` or its class)."""
        if self._defs is None:
            self._defs = self._build_defs()
        d = self._defs.get(id(fn))
        if d is None:
            return []
        static = any(_decorator_name(x) == "staticmethod" for x in fn.decorator_list)
        found: list[tuple[CallSite, bool]] = []
        for site in self._calls_named(fn.name):
            func = site.call.func
            if d.owner:
                if not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Name):
                    continue
                receiver = func.value.id
                own = receiver in ("self", "cls") and site.qualname.split(".")[-2:-1] == [d.owner]
                if not (own or receiver == d.owner):
                    continue
                found.append((site, not static))
            elif isinstance(func, ast.Name):
                found.append((site, False))
        found.sort(key=lambda s: (s[0].call.lineno, s[0].call.col_offset))
        return found[:MAX_CALLS]


_BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)


# The fields that hold statements (or except handlers, match cases), per node class of the grammar,
# in field order; an expression holds none. A class not listed is looked through field by field.
_BLOCK_FIELDS: dict[type, tuple[str, ...]] = {
    ast.Module: ("body",), ast.Interactive: ("body",), ast.FunctionDef: ("body",), ast.AsyncFunctionDef: ("body",),
    ast.ClassDef: ("body",), ast.For: ("body", "orelse"), ast.AsyncFor: ("body", "orelse"),
    ast.While: ("body", "orelse"), ast.If: ("body", "orelse"), ast.With: ("body",), ast.AsyncWith: ("body",),
    ast.Match: ("cases",), ast.match_case: ("body",), ast.ExceptHandler: ("body",),
    ast.Try: ("body", "handlers", "orelse", "finalbody"), ast.TryStar: ("body", "handlers", "orelse", "finalbody"),
    **dict.fromkeys((ast.Return, ast.Delete, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Raise, ast.Assert,
                     ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Expr, ast.Pass, ast.Break,
                     ast.Continue), ()),
}


def statement_children(node: ast.AST) -> list[ast.AST]:
    """The statements (and except handlers, match cases) directly inside a node, in field order:
    every definition and `return` of a tree is reached through these alone."""
    fields = _BLOCK_FIELDS.get(type(node))
    out: list[ast.AST] = []
    if fields is not None:
        for name in fields:
            value = getattr(node, name, None)
            if isinstance(value, list):
                out += [c for c in value if isinstance(c, _BLOCKS)]
        return out
    for name in node._fields:
        value = getattr(node, name, None)
        if isinstance(value, list):
            out += [c for c in value if isinstance(c, _BLOCKS)]
    return out


def _called_name(func: ast.expr) -> Optional[str]:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _decorator_name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    return target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else ""


def bind(fn: FuncNode, call: ast.Call, implicit_first: bool) -> dict[str, tuple[ast.expr, bool]]:
    """Parameter -> (the expression the call gives it, whether passed or the default). A
    parameter a `*args` or `**kwargs` of the call may fill is left out: the call does not say."""
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    given = positional[1:] if implicit_first else positional
    out: dict[str, tuple[ast.expr, bool]] = {}
    starred = any(isinstance(x, ast.Starred) for x in call.args)
    for p, arg in zip(given, call.args):
        if isinstance(arg, ast.Starred):
            break
        out[p.arg] = (arg, True)
    spread = starred or any(k.arg is None for k in call.keywords)
    for k in call.keywords:
        if k.arg is not None:
            out[k.arg] = (k.value, True)
    if not spread:
        for p, default in zip(positional[len(positional) - len(a.defaults):], a.defaults):
            out.setdefault(p.arg, (default, False))
        for p, kw_default in zip(a.kwonlyargs, a.kw_defaults):
            if kw_default is not None:
                out.setdefault(p.arg, (kw_default, False))
    return out


# An early exit: the code after it runs only when it is not taken. An earlier `raise` is not one:
# kb reports that error first, and this one as the next once it is fixed.
_EXITS = (ast.Return, ast.Continue, ast.Break)
_UNCERTAIN = (ast.For, ast.AsyncFor, ast.While, ast.Try, ast.TryStar, ast.With, ast.AsyncWith, ast.Match)


def _exits(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], _EXITS)


def _breaks(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], ast.Break)


# While one file's tree is walked (`remembered`): id -> (statement, whether an exit is inside). The
# statements before a raise are asked about again for every raise after them.
_exit_memo: Optional[dict[int, tuple[ast.stmt, bool]]] = None


@contextmanager
def remembered() -> Iterator[None]:
    """Remember `_exit_inside` per statement while one file's tree is walked (it is not changed
    meanwhile; the statements are kept alive, so their ids stay theirs)."""
    global _exit_memo
    outer, _exit_memo = _exit_memo, {}
    try:
        yield
    finally:
        _exit_memo = outer


def _exit_inside(stmt: ast.stmt) -> bool:
    """The statement holds a `return` (of this function), or a `continue` / `break` of the loop it
    is in, anywhere inside: not in a nested function, nor, for `continue` / `break`, a nested loop."""
    memo = _exit_memo
    if memo is not None:
        known = memo.get(id(stmt))
        if known is not None and known[0] is stmt:
            return known[1]
    found = _find_exit(stmt)
    if memo is not None:
        memo[id(stmt)] = (stmt, found)
    return found


def _find_exit(stmt: ast.stmt) -> bool:
    stack: list[tuple[ast.AST, bool]] = [(stmt, False)]
    while stack:
        n, in_loop = stack.pop()
        if isinstance(n, ast.Return) or (isinstance(n, (ast.Continue, ast.Break)) and not in_loop):
            return True
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        inner = in_loop or isinstance(n, (ast.For, ast.AsyncFor, ast.While))
        stack.extend((c, inner) for c in ast.iter_child_nodes(n))
    return False


def reached_when(body: list[ast.stmt], line: int, enclosing: bool,
                 loops_known: bool = False) -> tuple[list[ast.expr], bool]:
    """What a statement at `line` of a function's body runs under: the tests of the early exits
    (`return`, `continue`, `break`) before it in its blocks (`if x is None: return`: `not x is None`), and with `enclosing` the
    tests of the `if`s around it (negated in their `else`). The second value is False when it is
    inside a loop, `try`, `with` or `match`, or after an exit kb does not write as a condition (an
    `elif ...: return`, a `return` deeper inside): then the conditions are not all known.
    `loops_known`: a `for` loop or a `with` around it leaves them known (a raise site's loops are
    modelled apart)."""
    out: list[ast.expr] = []
    block: Optional[list[ast.stmt]] = body
    certain = True
    while block is not None:
        inside: Optional[list[ast.stmt]] = None
        for stmt in block:
            first, last = stmt.lineno, stmt.end_lineno or stmt.lineno
            if first <= line <= last:
                if isinstance(stmt, ast.If):
                    in_body = bool(stmt.body) and stmt.body[0].lineno <= line
                    in_else = bool(stmt.orelse) and stmt.orelse[0].lineno <= line
                    if in_else:
                        if enclosing:
                            out.append(_negated(stmt.test))
                        inside = stmt.orelse
                    elif in_body:
                        if enclosing:
                            out.append(stmt.test)
                        inside = stmt.body
                elif isinstance(stmt, _UNCERTAIN):
                    if not (loops_known and isinstance(stmt, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith))):
                        certain = False
                    inside = next((b for b in _blocks(stmt) if b and b[0].lineno <= line <= (b[-1].end_lineno or 0)),
                                  None)
                break
            if isinstance(stmt, ast.If) and (_breaks(stmt.body) or _breaks(stmt.orelse)):
                certain = False  # a `break` ends the loop for the items after it too: not one item's condition
            elif isinstance(stmt, ast.If) and _exits(stmt.body) and not stmt.orelse and \
                    not any(_exit_inside(x) for x in stmt.body[:-1]):
                out.append(_negated(stmt.test))
            elif isinstance(stmt, ast.If) and _exits(stmt.orelse) and not _exits(stmt.body) and \
                    not any(_exit_inside(x) for x in (*stmt.body, *stmt.orelse[:-1])):
                out.append(stmt.test)
            elif _exit_inside(stmt):
                certain = False  # an exit kb does not write as a condition
        block = inside
    return out, certain


def _blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    out: list[list[ast.stmt]] = []
    for name in ("body", "orelse", "finalbody"):
        value = getattr(stmt, name, None)
        if isinstance(value, list):
            out.append(value)
    for h in getattr(stmt, "handlers", []) or []:
        out.append(h.body)
    for c in getattr(stmt, "cases", []) or []:
        out.append(c.body)
    return out


def _negated(test: ast.expr) -> ast.expr:
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return test.operand
    return ast.copy_location(ast.UnaryOp(ast.Not(), test), test)
