"""One file's bytes -> FileFacts: every raise with its template, guard and context.

Only statements are walked (raises, ifs, loops, handlers, functions and classes are all
statements), never every expression node: that keeps the walk a small fraction of
`ast.parse` itself. The result depends only on the file's bytes, so it can be cached by
content hash.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import collections
import copy
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Optional, Union

from kb.model import REACH_UNKNOWN, Builder, CallArg, Caller, ClassFact, Context, FileFacts, LocalDef, RaiseFact
from kb.scan.calls import CallIndex, bind, reached_when, remembered, statement_children
from kb.scan.messages import template_of
from kb.scan.unparse import unparse

_FuncNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]
_VALIDATOR_DECORATORS = {"field_validator", "model_validator", "validator", "root_validator"}
_PYDANTIC_BASES = {"BaseModel", "BaseSettings", "RootModel"}
_BUILTIN_NAMES = frozenset(dir(builtins)) | {"self", "cls"}
_MAX_LOCAL_DEPTH = 3
_MAX_HOPS = 2  # calls followed back from a raise: its function's callers, and theirs
# Deeper expressions (a message of hundreds of `+` terms, a guard, a `for` head, a `msg +=`
# chain) skip their statement with a located warning: rebuilding and unparsing them recurses,
# and so does everything downstream that reads a guard or a template again. Longer texts (a
# message that pulls in a megabyte constant) would be copied into every output of every site.
MAX_NESTING = 100
MAX_TEXT = 5_000  # characters of a message, a guard term, a local's definition, a context head
MAX_CLASS_NAME = 100
_DEEP = f"not scanned: an expression here, or a name it reads, nests more than {MAX_NESTING} levels deep"
_LONG = f"not scanned: a message, condition or context here is longer than {MAX_TEXT} characters"


class Unscannable(Exception):
    """The statement being walked is not scanned; the message says why (a located warning)."""


# While extract() walks one file: id -> (node, nesting_ok(node)). A guard's terms and a message's
# parts are checked again for every raise that reads them; nodes are never changed in place (a
# substitution works on a copy) and are kept alive here, so an id stays its node's.
_nesting_memo: Optional[dict[int, tuple[ast.AST, bool]]] = None


def nesting_ok(node: ast.AST, limit: int = MAX_NESTING) -> bool:
    """True when `node` nests at most `limit` levels (measured without recursion)."""
    memo = _nesting_memo if limit == MAX_NESTING else None
    if memo is not None:
        known = memo.get(id(node))
        if known is not None and known[0] is node:
            return known[1]
    ok = _nests_at_most(node, limit)
    if memo is not None:
        memo[id(node)] = (node, ok)
    return ok


def _nests_at_most(node: ast.AST, limit: int) -> bool:
    stack = [(node, 1)]
    while stack:
        n, depth = stack.pop()
        if depth > limit:
            return False
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(n))
    return True


@contextmanager
def _remembered() -> Iterator[None]:
    """What is asked of the same nodes again and again while one file is walked, remembered."""
    global _nesting_memo
    outer, _nesting_memo = _nesting_memo, {}
    try:
        with remembered():
            yield
    finally:
        _nesting_memo = outer


def bounded(node: ast.expr) -> ast.expr:
    """`node`, after checking that it can be rebuilt and unparsed (Unscannable otherwise)."""
    if not nesting_ok(node):
        raise Unscannable(_DEEP)
    return node


def short(text: str) -> str:
    if len(text) > MAX_TEXT:
        raise Unscannable(_LONG)
    return text


def source_of(node: ast.AST) -> str:
    """`ast.unparse`, for a node of bounded nesting and source length only."""
    if not nesting_ok(node):
        raise Unscannable(_DEEP)
    return short(ast.unparse(node))


def may_hold_facts(data: bytes) -> bool:
    """A file without the words `raise` and `class` can hold no site and no exception class:
    it need not be parsed (about a fifth of vLLM's files, a sixth of the parse time)."""
    return b"raise" in data or b"class" in data


def extract(data: bytes) -> FileFacts:
    """Parse one file and collect its raises and class definitions. Never raises on bad input."""
    try:
        module = ast.parse(data)
    except SyntaxError as e:
        line = e.lineno or (_null_line(data) if b"\x00" in data else 1)
        return FileFacts(error=(line, f"cannot parse: {e.msg}"))
    except ValueError as e:  # e.g. null bytes
        return FileFacts(error=(_null_line(data), f"cannot parse: {e}"))
    except (RecursionError, MemoryError):  # CPython's parser: MemoryError past its stack, e.g. 200 `[` after an unclosed `(`
        return FileFacts(error=(1, "cannot parse: too deeply nested"))
    with _remembered():
        return _Walker(module, interesting_lines(data), data).run()


_INTERESTING = re.compile(rb"raise|class")


def interesting_lines(data: bytes) -> list[int]:
    """Sorted numbers of the lines that mention `raise` or `class`: only subtrees holding one
    of them are walked. A mention in a comment or string only costs a useless visit."""
    lines: list[int] = []
    line, last = 1, 0
    for m in _INTERESTING.finditer(data):
        line += data.count(b"\n", last, m.start())
        last = m.start()
        if not lines or lines[-1] != line:
            lines.append(line)
    return lines


def _null_line(data: bytes) -> int:
    i = data.find(b"\x00")
    return data.count(b"\n", 0, i) + 1 if i >= 0 else 1


def term_source(expr: ast.expr) -> str:
    """Source of one guard term, parenthesised when joining it with `and` would change it."""
    src = short(unparse(bounded(expr)))
    if isinstance(expr, (ast.BoolOp, ast.IfExp, ast.Lambda, ast.NamedExpr)) and not (
        isinstance(expr, ast.BoolOp) and isinstance(expr.op, ast.And)
    ):
        return f"({src})"
    return src


def negate(expr: ast.expr) -> ast.expr:
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        return expr.operand
    return ast.UnaryOp(op=ast.Not(), operand=expr)


Branches = tuple[tuple[int, int], ...]  # (id of an `if`, 0 for its body or 1 for its else), outermost first


@dataclass
class _Assignment:
    line: int
    value: ast.expr
    augmented: bool  # `+=`
    branches: Branches = ()


def _reaches(a: _Assignment, path: Optional[Branches]) -> bool:
    """False when the assignment is in one branch of an `if` and `path` (where the name is read)
    in the other: `if x is None: x = 1` / `elif x > 2: raise` never sees that `x = 1`."""
    if path is None:
        return True
    taken = dict(path)
    return all(taken.get(node, branch) == branch for node, branch in a.branches)


@dataclass
class _Scope:
    """A function (or the module) whose simple assignments are used to trace names."""

    node: Optional[_FuncNode]
    assignments: dict[str, list[_Assignment]] = field(default_factory=dict)
    appended: dict[str, list[_Assignment]] = field(default_factory=dict)  # `name.append(x)`: the parts of a list
    collected: bool = False


class _Walker:
    def __init__(self, module: ast.Module, interesting: list[int], data: bytes = b"") -> None:
        self.module = module
        self.interesting = interesting
        # id(test node) -> (node, source): shared by sibling raises; holding the node keeps its id unique
        self.term_text: dict[int, tuple[ast.expr, str]] = {}
        self.classes: list[ClassFact] = []
        self.raises: list[RaiseFact] = []
        self.names: list[str] = []  # qualname parts
        self.kinds: list[str] = []  # "class" or "function", beside names
        self.terms: list[ast.expr] = []  # enclosing if tests (negated in else branches)
        self.path: list[tuple[int, int]] = []  # the branch of each enclosing `if` (see _reaches)
        self.contexts: list[Context] = []
        self.loops: list[ast.expr] = []  # what the enclosing `for` loops walk
        self.functions: list[_FuncNode] = []
        self.class_pydantic: list[bool] = []
        self.module_scope = _Scope(None)
        self.scopes: dict[int, _Scope] = {}
        self.pydantic_decorators = _pydantic_decorator_names(module)
        self.skipped: list[tuple[int, str]] = []  # (line, why) of statements not scanned
        self.calls = CallIndex(module, data)
        self.data = data
        self.caller_memo: dict[tuple[int, tuple[str, ...], int], tuple[Caller, ...]] = {}

    def run(self) -> FileFacts:
        _collect_assignments(self.module.body, self.module_scope)
        self.module_scope.collected = True
        self.block(self.module.body)
        return FileFacts(tuple(self.classes), tuple(self.raises), None, tuple(self.skipped),
                         builders(self.module, self.module_scope, self.scope_of, self.data))

    # --- statements -------------------------------------------------------------------------
    def block(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, _SIMPLE):
                continue
            end = stmt.end_lineno or stmt.lineno
            i = bisect.bisect_left(self.interesting, _first_line(stmt))
            if i < len(self.interesting) and self.interesting[i] <= end:
                try:
                    self.stmt(stmt)
                except Unscannable as e:  # one such statement never stops the scan
                    self.skipped.append((stmt.lineno, str(e)))
                except RecursionError:
                    self.skipped.append((stmt.lineno, _DEEP))

    def stmt(self, node: ast.stmt) -> None:
        if not isinstance(node, _BLOCKS) or isinstance(node, (ast.Try, ast.TryStar)):
            self.statement(node)  # a `try`'s body, handlers and `else` exclude each other: none is on the path
            return
        self.path.append((id(node), -1))  # inside it: its assignments are not conditional for its raises
        try:
            self.statement(node)
        finally:
            self.path.pop()

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Raise):
            self.raise_(node)
        elif isinstance(node, ast.If):
            self.term(node.test)  # Unscannable here skips the whole `if`
            self.terms.append(node.test)
            self.path.append((id(node), 0))
            try:
                self.block(node.body)
                self.terms[-1] = negate(node.test)
                self.path[-1] = (id(node), 1)
                self.block(node.orelse)
            finally:
                self.terms.pop()
                self.path.pop()
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.function(node)
        elif isinstance(node, ast.ClassDef):
            self.class_(node)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            head = short(f"for {source_of(node.target)} in {source_of(node.iter)}")
            self.loops.append(node.iter)
            try:
                self.with_context(Context("for", head, node.lineno), node.body)
            finally:
                self.loops.pop()
            self.with_context(Context("for-else", head, node.lineno), node.orelse)
        elif isinstance(node, ast.While):
            head = short(f"while {unparse(bounded(node.test))}")
            self.with_context(Context("while", head, node.lineno), node.body)
            self.with_context(Context("while-else", head, node.lineno), node.orelse)
        elif isinstance(node, (ast.Try, ast.TryStar)):
            self.block(node.body)
            for handler in node.handlers:
                try:
                    head = "except" + (f" {source_of(handler.type)}" if handler.type is not None else "")
                except Unscannable as e:
                    self.skipped.append((handler.lineno, str(e)))
                    continue
                self.with_context(Context("except", head, handler.lineno), handler.body)
            self.block(node.orelse)
            self.block(node.finalbody)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            head = short("with " + ", ".join(source_of(i) for i in node.items))
            self.with_context(Context("with", head, node.lineno), node.body)
        elif isinstance(node, ast.Match):
            subject = source_of(node.subject)
            for case in node.cases:
                head = f"match {subject}: case {source_of(case.pattern)}"
                if case.guard is not None:
                    head = short(head + f" if {unparse(bounded(case.guard))}")
                self.with_context(Context("case", head, case.pattern.lineno), case.body)

    def with_context(self, context: Context, body: list[ast.stmt]) -> None:
        if not body:
            return
        self.contexts.append(context)
        try:
            self.block(body)
        finally:
            self.contexts.pop()

    @contextmanager
    def entered(self, name: str, kind: str, functions: list[_FuncNode]) -> Iterator[None]:
        """Inside a function or class: the guard and contexts start afresh, and everything is
        restored on the way out, whatever happens inside."""
        saved = (self.terms, self.contexts, self.functions, self.loops, self.path)
        self.terms, self.contexts, self.functions, self.loops, self.path = [], [], functions, [], []
        self.names.append(name)
        self.kinds.append(kind)
        try:
            yield
        finally:
            self.kinds.pop()
            self.names.pop()
            self.terms, self.contexts, self.functions, self.loops, self.path = saved

    def function(self, node: _FuncNode) -> None:
        with self.entered(node.name, "function", [*self.functions, node]):
            self.block(node.body)

    def class_(self, node: ast.ClassDef) -> None:
        bases = tuple(b for b in (_last_name(b) for b in node.bases) if b)
        self.classes.append(ClassFact(node.name, bases, node.lineno))
        pydantic = bool(set(bases) & _PYDANTIC_BASES) or any(
            _last_name(_decorator_callee(d)) in self.pydantic_decorators for d in node.decorator_list
        )
        self.class_pydantic.append(pydantic)
        try:
            with self.entered(node.name, "class", []):
                self.block(node.body)
        finally:
            self.class_pydantic.pop()

    # --- the raise itself -------------------------------------------------------------------
    def raise_(self, node: ast.Raise) -> None:
        exc = node.exc
        if exc is None:
            return  # bare re-raise
        bounded(exc)
        callee = exc.func if isinstance(exc, ast.Call) else exc
        name = _last_name(callee)
        if name is None:
            return
        if len(name) > MAX_CLASS_NAME:  # it names a folder of the site (browse/class/<name>/)
            raise Unscannable(f"not scanned: an exception class name longer than {MAX_CLASS_NAME} characters")
        scope = self.scope()
        resolve = _Resolver(scope, self.module_scope, node.lineno)
        message = exc.args[0] if isinstance(exc, ast.Call) and exc.args else None
        if message is None and isinstance(exc, ast.Call):
            message = next((k.value for k in exc.keywords if k.arg in ("msg", "message")), None)
        template = template_of(message, resolve)
        parts = _joined_parts(message, scope, resolve, node.lineno)
        builder = (_last_name(message.func) or "") if isinstance(message, ast.Call) else ""
        for text in (template.text, *parts):
            short(text)
        function = self.functions[-1] if self.functions else None
        decorators = tuple(source_of(_decorator_callee(d)) for d in function.decorator_list) if function else ()
        pydantic_class = bool(self.class_pydantic) and self.class_pydantic[-1] and _in_class_or_method(self.kinds)
        exits: list[ast.expr] = []
        certain = True
        if function is not None:
            exits, certain = reached_when(function.body, node.lineno, enclosing=False, loops_known=True)
            exits = [e for e in exits if nesting_ok(e) and e.lineno < node.lineno]
        locals_, reads = _guard_reads([*self.terms, *self.loops, *exits], scope, self.module_scope, node.lineno,
                                      tuple(self.path))
        callers: tuple[Caller, ...] = ()
        if function is not None:  # also with no parameter read: where it is called orders it (kb check)
            params = tuple(n for n in reads if n not in ("self", "cls") and _is_parameter(function, n))
            callers = self.callers(function, params)
        self.raises.append(
            RaiseFact(
                line=node.lineno,
                end_line=node.end_lineno or node.lineno,
                qualname=".".join(self.names) or "<module>",
                exception=source_of(callee),
                exception_name=name,
                template=template.text,
                unresolved=template.unresolved,
                message_kind=template.kind,
                guard_terms=tuple(self.term(t) for t in self.terms),
                contexts=tuple(self.contexts),
                locals=locals_,
                decorators=decorators,
                pydantic_class=pydantic_class,
                validation=_validation(function, decorators, pydantic_class),
                parts=parts,
                builder=builder,
                callers=callers,
                exits=tuple(self.term(t) for t in exits) + (() if certain else (REACH_UNKNOWN,)),
            )
        )

    def callers(self, fn: _FuncNode, params: tuple[str, ...], hops: int = 0) -> tuple[Caller, ...]:
        """The calls of `fn` in this file, with what each passes for `params`; from a caller's own
        parameters that its arguments read, one hop further back (up to _MAX_HOPS)."""
        key = (id(fn), params, hops)
        if key in self.caller_memo:
            return self.caller_memo[key]
        self.caller_memo[key] = ()  # a function that calls itself reads nothing more through it
        found: list[Caller] = []
        for site, implicit in self.calls.calls_of(fn):
            bound = bind(fn, site.call, implicit)
            try:
                args = [(CallArg(p, source_of(bound[p][0]), bound[p][1]), bound[p][0]) for p in params if p in bound]
                scope = self.scope_of(site.function)
                under, certain = reached_when(site.function.body if site.function is not None else self.module.body,
                                              site.call.lineno, enclosing=True)
                under = [u for u in under if nesting_ok(u)]
                guard = tuple(self.term(u) for u in under) + (() if certain else (REACH_UNKNOWN,))
                locals_, reads = _guard_reads([*(e for _, e in args), *under], scope, self.module_scope,
                                              site.call.lineno)
            except Unscannable:
                continue
            more: tuple[Caller, ...] = ()
            if site.function is not None and hops + 1 < _MAX_HOPS:
                wanted = tuple(n for n in reads if n not in ("self", "cls") and _is_parameter(site.function, n))
                more = self.callers(site.function, wanted, hops + 1)
            found.append(Caller(site.qualname, site.call.lineno, tuple(a for a, _ in args), locals_, more, guard))
        self.caller_memo[key] = tuple(found)
        return self.caller_memo[key]

    def term(self, test: ast.expr) -> str:
        known = self.term_text.get(id(test))
        if known is None:
            known = self.term_text[id(test)] = (test, term_source(test))
        return known[1]

    def scope(self) -> _Scope:
        return self.scope_of(self.functions[-1] if self.functions else None)

    def scope_of(self, fn: Optional[_FuncNode]) -> _Scope:
        if fn is None:
            return self.module_scope
        scope = self.scopes.get(id(fn))
        if scope is None:
            scope = _Scope(fn)
            _collect_assignments(fn.body, scope)
            scope.collected = True
            self.scopes[id(fn)] = scope
        return scope


# Statements that can neither raise nor hold a raise or a class definition.
_SIMPLE = (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return, ast.Pass, ast.Import, ast.ImportFrom,
           ast.Assert, ast.Delete, ast.Global, ast.Nonlocal, ast.Break, ast.Continue)


def _first_line(stmt: ast.stmt) -> int:
    decorators = getattr(stmt, "decorator_list", None)
    return min([stmt.lineno] + [d.lineno for d in decorators]) if decorators else stmt.lineno


def _in_class_or_method(kinds: list[str]) -> bool:
    """True when the raise is in a class body or directly in one of its methods."""
    return kinds[-1:] == ["class"] or kinds[-2:] == ["class", "function"]


def _validation(function: Optional[_FuncNode], decorators: tuple[str, ...], pydantic_class: bool) -> Optional[str]:
    """How pydantic runs this function, when it does: its errors then arrive as ValidationError."""
    for d in decorators:
        last = d.rsplit(".", 1)[-1]
        if last in _VALIDATOR_DECORATORS:
            return last
    if function is not None and pydantic_class and function.name in ("__post_init__", "__init__"):
        return "post_init" if function.name == "__post_init__" else "init"
    return None


def _pydantic_decorator_names(module: ast.Module) -> set[str]:
    """Local names that make a class a pydantic dataclass: pydantic's `dataclass`, vLLM's `config`."""
    names = {"config"}  # vllm/config/utils.py: `config` wraps pydantic.dataclasses.dataclass
    for stmt in module.body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module == "pydantic.dataclasses":
            names.update(a.asname or a.name for a in stmt.names if a.name == "dataclass")
        elif isinstance(stmt, ast.ImportFrom) and stmt.module == "pydantic":
            names.update(a.asname or a.name for a in stmt.names if a.name == "dataclasses")
    return names


def _decorator_callee(node: ast.expr) -> ast.expr:
    return node.func if isinstance(node, ast.Call) else node


def _last_name(node: ast.expr) -> Optional[str]:
    while isinstance(node, ast.Subscript):  # Generic[T] and the like
        node = node.value
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


# --- tracing names to their assignments -------------------------------------------------------
# Blocks whose statements may not run (loops, `try`, `with`, `match`): an assignment inside one is
# conditional for a raise outside it (LocalDef.conditional); the walker's path holds those around the raise.
_BLOCKS = (ast.For, ast.AsyncFor, ast.While, ast.Try, ast.TryStar, ast.With, ast.AsyncWith, ast.Match)


def _collect_assignments(body: list[ast.stmt], scope: _Scope) -> None:
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
                        (*path, (id(node), -1)) if isinstance(node, _BLOCKS) else path
                    stack.extend((c, inner) for c in reversed(children)
                                 if isinstance(c, (ast.stmt, ast.excepthandler, ast.match_case)))
    for assignments in scope.assignments.values():
        assignments.sort(key=lambda a: a.line)


def _joined_parts(message: Optional[ast.expr], scope: _Scope, resolve: _Resolver, line: int) -> tuple[str, ...]:
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


def _binding(scope: _Scope, name: str, before: int, hops: int = 0,
             path: Optional[Branches] = None) -> Optional[ast.expr]:
    """The expression `name` holds just before line `before` (read on the `path` of branches
    when given), folding `+=` into `+` (Unscannable when that nests deeper than MAX_NESTING)."""
    history = [a for a in scope.assignments.get(name, ()) if a.line < before and _reaches(a, path)]
    if not history:
        return None
    start = max((i for i, a in enumerate(history) if not a.augmented), default=None)
    if start is None:
        return None
    if len(history) - start > MAX_NESTING:
        raise Unscannable(_DEEP)
    value = _substitute_self(history[start].value, name, scope, history[start].line, hops, path)
    for a in history[start + 1 :]:
        value = ast.BinOp(left=value, op=ast.Add(), right=a.value)
    return bounded(value)


def _substitute_self(value: ast.expr, name: str, scope: _Scope, line: int, hops: int,
                     path: Optional[Branches] = None) -> ast.expr:
    """`msg = msg + "..."`: replace the inner `msg` by what it held before that line."""
    if not any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(value)):
        return value
    if hops >= MAX_NESTING:
        raise Unscannable(_DEEP)
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


class _Resolver:
    """Resolves a name at a raise: the function's own assignments first, then module constants."""

    def __init__(self, scope: _Scope, module_scope: _Scope, line: int) -> None:
        self.scope, self.module_scope, self.line = scope, module_scope, line

    def __call__(self, name: str) -> Optional[ast.expr]:
        if self.scope is not self.module_scope:
            if name in self.scope.assignments:
                return _binding(self.scope, name, self.line)
            if _is_parameter(self.scope.node, name):
                return None
        value = _binding(self.module_scope, name, 10**9 if self.scope is not self.module_scope else self.line)
        if value is not None and _is_text(value):
            return value
        return None


def _is_text(value: ast.expr) -> bool:
    """Module constants are followed only when they build text (not e.g. a compiled regex)."""
    return isinstance(value, (ast.Constant, ast.JoinedStr, ast.BinOp)) or (
        isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "format"
    )


def _is_parameter(fn: Optional[_FuncNode], name: str) -> bool:
    if fn is None:
        return False
    a = fn.args
    params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    if a.vararg:
        params.append(a.vararg)
    if a.kwarg:
        params.append(a.kwarg)
    return any(p.arg == name for p in params)


def _guard_reads(terms: list[ast.expr], scope: _Scope, module_scope: _Scope, line: int,
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
                       if a.line < line and not a.augmented and _reaches(a, path)]
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


# --- messages built away from the raise ----------------------------------------------------------
_BUILDER_LITERAL = 12  # literal characters a built message needs to be worth matching on its own
_WORDY = re.compile(r"[A-Za-z]{3}")


def builders(module: ast.Module, module_scope: _Scope, scope_of: Optional[Callable[[_FuncNode], _Scope]] = None,
             data: bytes = b"") -> tuple[Builder, ...]:
    """Functions of the file that return a message (`def _make_log_unsupported(backend, reason):
    return f"... {reason}."`) and exception classes whose `__init__` passes one to
    `super().__init__` (`EngineDeadError`: `self.ENGINE_DEAD_MESSAGE`). A raise that calls such a
    function, or raises such a class, gets their templates as parts its message can be matched
    by. A definition too deep or too long to read is left out. `scope_of`: a function's scope,
    shared with the walk of the raises; `data`: the file's bytes, to pass over an `__init__` that
    does not mention `__init__` again (it cannot call its base's)."""
    out: list[Builder] = []
    returns = _own_returns(module)
    mentions = _Mentions(data, b"__init__")
    for node in _walk_statements(module):
        try:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name != "__init__":
                own = returns.get(id(node))
                templates = _returned_templates(node, module_scope, own, scope_of) if own else ()
                if templates:
                    out.append(Builder(node.name, node.lineno, "function", templates))
            elif isinstance(node, ast.ClassDef):
                found = _exception_builder(node, module_scope, scope_of, mentions)
                if found is not None:
                    out.append(found)
        except (Unscannable, RecursionError):
            continue
    return tuple(out)


def _own_returns(module: ast.Module) -> dict[int, list[ast.Return]]:
    """id(function) -> the `return` statements of its own body (not of functions or classes inside
    it) that return text or a name, in order: one walk of the file's statements for all functions."""
    found: dict[int, list[ast.Return]] = {}
    stack: list[tuple[ast.AST, Optional[ast.AST]]] = [(module, None)]
    while stack:
        node, owner = stack.pop()
        if isinstance(node, ast.Return):
            if owner is not None and node.value is not None and (_is_text(node.value) or isinstance(node.value, ast.Name)):
                found.setdefault(id(owner), []).append(node)
            continue
        inner = node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
            else None if isinstance(node, ast.ClassDef) else owner
        stack.extend((c, inner) for c in reversed(statement_children(node)))
    return found


class _Mentions:
    """Where a word is written in a file: whether a line range holds it at least `n` times."""

    def __init__(self, data: bytes, word: bytes) -> None:
        # Line numbers as ast counts them, where lines end with \n only (else: every range may hold it).
        self.lines: Optional[list[int]] = None
        if data and b"\r" not in data:
            self.lines = []
            line, last = 1, 0
            for m in re.finditer(re.escape(word), data):
                line += data.count(b"\n", last, m.start())
                last = m.start()
                self.lines.append(line)

    def at_least(self, n: int, first: int, last: int) -> bool:
        if self.lines is None:
            return True
        return bisect.bisect_right(self.lines, last) - bisect.bisect_left(self.lines, first) >= n


def _worth(text: str) -> bool:
    literal = re.sub(r"\{[^{}]*\}", "", text)
    return len(literal.strip()) >= _BUILDER_LITERAL and bool(_WORDY.search(literal))


def _walk_statements(module: ast.Module) -> Iterator[ast.AST]:
    """`ast.walk` (breadth first) restricted to statements: the same definitions, in the same order."""
    queue: collections.deque[ast.AST] = collections.deque([module])
    while queue:
        node = queue.popleft()
        yield node
        queue.extend(statement_children(node))


def _own_statements(fn: _FuncNode) -> Iterator[ast.AST]:
    """The statements of a function's body in order, not those of functions or classes inside it."""
    inner = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    stack: list[ast.AST] = [s for s in reversed(fn.body) if not isinstance(s, inner)]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed([c for c in statement_children(n) if not isinstance(c, inner)]))


def _own_nodes(fn: _FuncNode) -> Iterator[ast.AST]:
    """The nodes of a function's body, not those of functions, classes or lambdas inside it."""
    inner = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
    stack: list[ast.AST] = [s for s in reversed(fn.body) if not isinstance(s, inner)]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed([c for c in ast.iter_child_nodes(n) if not isinstance(c, inner)]))


def _function_scope(fn: _FuncNode) -> _Scope:
    scope = _Scope(fn)
    _collect_assignments(fn.body, scope)
    scope.collected = True
    return scope


def _returned_templates(fn: _FuncNode, module_scope: _Scope, returns: Optional[list[ast.Return]] = None,
                        scope_of: Optional[Callable[[_FuncNode], _Scope]] = None) -> tuple[str, ...]:
    """`returns`: the function's own `return`s of text or a name (_own_returns), else found here."""
    if returns is None:
        returns = [n for n in _own_statements(fn) if isinstance(n, ast.Return) and n.value is not None
                   and (_is_text(n.value) or isinstance(n.value, ast.Name))]
    if not returns:
        return ()
    scope = scope_of(fn) if scope_of is not None else _function_scope(fn)
    out = []
    for r in returns:
        assert r.value is not None
        text = short(template_of(bounded(r.value), _Resolver(scope, module_scope, r.lineno)).text)
        if _worth(text):
            out.append(text)
    return tuple(dict.fromkeys(out))


class _ClassConstants(ast.NodeTransformer):
    """`self.NAME` (or `cls.NAME`) -> the text constant the class body assigns to NAME."""

    def __init__(self, constants: dict[str, ast.expr]) -> None:
        self.constants = constants

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls") and node.attr in self.constants:
            return copy.deepcopy(self.constants[node.attr])
        return self.generic_visit(node)


def _super_init_message(call: ast.Call) -> Optional[ast.expr]:
    """The message of `super().__init__(msg, ...)` or `Base.__init__(self, msg, ...)`."""
    f = call.func
    if not (isinstance(f, ast.Attribute) and f.attr == "__init__"):
        return None
    if isinstance(f.value, ast.Call) and isinstance(f.value.func, ast.Name) and f.value.func.id == "super":
        return call.args[0] if call.args else None
    if isinstance(f.value, (ast.Name, ast.Attribute)) and len(call.args) >= 2:
        return call.args[1]
    return None


def _with_defaults(resolve: _Resolver, defaults: dict[str, ast.expr]) -> Callable[[str], Optional[ast.expr]]:
    """A parameter left out takes its default (when that is text)."""

    def look(name: str) -> Optional[ast.expr]:
        if name in defaults:
            return defaults[name] if _is_text(defaults[name]) else None
        return resolve(name)

    return look


def _exception_builder(cls: ast.ClassDef, module_scope: _Scope,
                       scope_of: Optional[Callable[[_FuncNode], _Scope]] = None,
                       mentions: Optional[_Mentions] = None) -> Optional[Builder]:
    init = next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
    if init is None:
        return None
    # `Base.__init__(...)` writes `__init__` once more than the `def` does (a call's attribute is
    # one token, on its own line)
    if mentions is not None and not mentions.at_least(2, init.lineno, init.end_lineno or init.lineno):
        return None
    constants: dict[str, ast.expr] = {}
    for s in cls.body:
        if isinstance(s, ast.Assign) and _is_text(s.value):
            constants.update((t.id, s.value) for t in s.targets if isinstance(t, ast.Name))
        elif isinstance(s, ast.AnnAssign) and s.value is not None and _is_text(s.value) \
                and isinstance(s.target, ast.Name):
            constants[s.target.id] = s.value
    a = init.args
    positional = [*a.posonlyargs, *a.args]
    defaults: dict[str, ast.expr] = {p.arg: d for p, d in zip(positional[len(positional) - len(a.defaults):], a.defaults)}
    defaults.update((p.arg, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None)
    scope = scope_of(init) if scope_of is not None else _function_scope(init)
    templates: list[str] = []
    bare: list[str] = []
    for n in _own_nodes(init):
        if not isinstance(n, ast.Call):
            continue
        message = _super_init_message(n)
        if message is None:
            continue
        message = bounded(_ClassConstants(constants).visit(copy.deepcopy(message)))
        resolve = _Resolver(scope, module_scope, n.lineno)
        with_args = short(template_of(message, resolve).text)
        without = short(template_of(message, _with_defaults(resolve, defaults)).text)
        if _worth(with_args):
            templates.append(with_args)
        if _worth(without):
            bare.append(without)
    if not templates and not bare:
        return None
    return Builder(cls.name, cls.lineno, "exception", tuple(dict.fromkeys(templates)), tuple(dict.fromkeys(bare)))
