"""One file's bytes -> FileFacts: every raise with its template, guard and context.

Only statements are walked (raises, ifs, loops, handlers, functions and classes are all
statements), never every expression node: that keeps the walk a small fraction of
`ast.parse` itself. The result depends only on the file's bytes, so it can be cached by
content hash.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Optional

from kb.model import REACH_UNKNOWN, CallArg, Caller, ClassFact, Context, FileFacts, RaiseFact
from kb.scan.assignments import (
    BLOCKS,
    NameScope,
    Resolver,
    collect_assignments,
    guard_reads,
    is_parameter,
    joined_parts,
)
from kb.scan.builders import (
    builders,
)
from kb.scan.calls import CallIndex, bind, reached_when
from kb.scan.limits import (
    DEEP,
    MAX_CLASS_NAME,
    FuncNode,
    Unscannable,
    bounded,
    nesting_ok,
    remembered_nodes,
    short,
    source_of,
)
from kb.scan.messages import template_of
from kb.scan.unparse import unparse

_VALIDATOR_DECORATORS = {"field_validator", "model_validator", "validator", "root_validator"}
_PYDANTIC_BASES = {"BaseModel", "BaseSettings", "RootModel"}
_MAX_HOPS = 2  # calls followed back from a raise: its function's callers, and theirs


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
    with remembered_nodes():
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
        self.path: list[tuple[int, int]] = []  # the branch of each enclosing `if` (see reaches)
        self.contexts: list[Context] = []
        self.loops: list[ast.expr] = []  # what the enclosing `for` loops walk
        self.functions: list[FuncNode] = []
        self.class_pydantic: list[bool] = []
        self.module_scope = NameScope(None)
        self.scopes: dict[int, NameScope] = {}
        self.pydantic_decorators = _pydantic_decorator_names(module)
        self.skipped: list[tuple[int, str]] = []  # (line, why) of statements not scanned
        self.calls = CallIndex(module, data)
        self.data = data
        self.caller_memo: dict[tuple[int, tuple[str, ...], int], tuple[Caller, ...]] = {}

    def run(self) -> FileFacts:
        collect_assignments(self.module.body, self.module_scope)
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
                    self.skipped.append((stmt.lineno, DEEP))

    def stmt(self, node: ast.stmt) -> None:
        if not isinstance(node, BLOCKS) or isinstance(node, (ast.Try, ast.TryStar)):
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
    def entered(self, name: str, kind: str, functions: list[FuncNode]) -> Iterator[None]:
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

    def function(self, node: FuncNode) -> None:
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
        resolve = Resolver(scope, self.module_scope, node.lineno)
        message = exc.args[0] if isinstance(exc, ast.Call) and exc.args else None
        if message is None and isinstance(exc, ast.Call):
            message = next((k.value for k in exc.keywords if k.arg in ("msg", "message")), None)
        template = template_of(message, resolve)
        parts = joined_parts(message, scope, resolve, node.lineno)
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
        locals_, reads = guard_reads([*self.terms, *self.loops, *exits], scope, self.module_scope, node.lineno,
                                      tuple(self.path))
        callers: tuple[Caller, ...] = ()
        if function is not None:  # also with no parameter read: where it is called orders it (kb check)
            params = tuple(n for n in reads if n not in ("self", "cls") and is_parameter(function, n))
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

    def callers(self, fn: FuncNode, params: tuple[str, ...], hops: int = 0) -> tuple[Caller, ...]:
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
                locals_, reads = guard_reads([*(e for _, e in args), *under], scope, self.module_scope,
                                              site.call.lineno)
            except Unscannable:
                continue
            more: tuple[Caller, ...] = ()
            if site.function is not None and hops + 1 < _MAX_HOPS:
                wanted = tuple(n for n in reads if n not in ("self", "cls") and is_parameter(site.function, n))
                more = self.callers(site.function, wanted, hops + 1)
            found.append(Caller(site.qualname, site.call.lineno, tuple(a for a, _ in args), locals_, more, guard))
        self.caller_memo[key] = tuple(found)
        return self.caller_memo[key]

    def term(self, test: ast.expr) -> str:
        known = self.term_text.get(id(test))
        if known is None:
            known = self.term_text[id(test)] = (test, term_source(test))
        return known[1]

    def scope(self) -> NameScope:
        return self.scope_of(self.functions[-1] if self.functions else None)

    def scope_of(self, fn: Optional[FuncNode]) -> NameScope:
        if fn is None:
            return self.module_scope
        scope = self.scopes.get(id(fn))
        if scope is None:
            scope = NameScope(fn)
            collect_assignments(fn.body, scope)
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


def _validation(function: Optional[FuncNode], decorators: tuple[str, ...], pydantic_class: bool) -> Optional[str]:
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
