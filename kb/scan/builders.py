"""Messages built away from the raise: a function that returns the message a raise passes
(`raise ValueError(msg_for(x))`), an exception class whose `__init__` writes its own message;
each becomes a template of its own where it has enough literal text to be matched."""

from __future__ import annotations

import ast
import bisect
import collections
import copy
import re
from collections.abc import Callable, Iterator
from typing import Optional

from kb.model import Builder
from kb.scan.assignments import (
    NameScope,
    Resolver,
    collect_assignments,
    is_text,
)
from kb.scan.calls import statement_children
from kb.scan.limits import (
    FuncNode,
    Unscannable,
    bounded,
    short,
)
from kb.scan.messages import template_of

# --- messages built away from the raise ----------------------------------------------------------
_BUILDER_LITERAL = 12  # literal characters a built message needs to be worth matching on its own
_WORDY = re.compile(r"[A-Za-z]{3}")


def builders(module: ast.Module, module_scope: NameScope, scope_of: Optional[Callable[[FuncNode], NameScope]] = None,
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
            if owner is not None and node.value is not None and (is_text(node.value) or isinstance(node.value, ast.Name)):
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


def _own_statements(fn: FuncNode) -> Iterator[ast.AST]:
    """The statements of a function's body in order, not those of functions or classes inside it."""
    inner = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    stack: list[ast.AST] = [s for s in reversed(fn.body) if not isinstance(s, inner)]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed([c for c in statement_children(n) if not isinstance(c, inner)]))


def _own_nodes(fn: FuncNode) -> Iterator[ast.AST]:
    """The nodes of a function's body, not those of functions, classes or lambdas inside it."""
    inner = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
    stack: list[ast.AST] = [s for s in reversed(fn.body) if not isinstance(s, inner)]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed([c for c in ast.iter_child_nodes(n) if not isinstance(c, inner)]))


def _function_scope(fn: FuncNode) -> NameScope:
    scope = NameScope(fn)
    collect_assignments(fn.body, scope)
    scope.collected = True
    return scope


def _returned_templates(fn: FuncNode, module_scope: NameScope, returns: Optional[list[ast.Return]] = None,
                        scope_of: Optional[Callable[[FuncNode], NameScope]] = None) -> tuple[str, ...]:
    """`returns`: the function's own `return`s of text or a name (_own_returns), else found here."""
    if returns is None:
        returns = [n for n in _own_statements(fn) if isinstance(n, ast.Return) and n.value is not None
                   and (is_text(n.value) or isinstance(n.value, ast.Name))]
    if not returns:
        return ()
    scope = scope_of(fn) if scope_of is not None else _function_scope(fn)
    out = []
    for r in returns:
        assert r.value is not None
        text = short(template_of(bounded(r.value), Resolver(scope, module_scope, r.lineno)).text)
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


def _with_defaults(resolve: Resolver, defaults: dict[str, ast.expr]) -> Callable[[str], Optional[ast.expr]]:
    """A parameter left out takes its default (when that is text)."""

    def look(name: str) -> Optional[ast.expr]:
        if name in defaults:
            return defaults[name] if is_text(defaults[name]) else None
        return resolve(name)

    return look


def _exception_builder(cls: ast.ClassDef, module_scope: NameScope,
                       scope_of: Optional[Callable[[FuncNode], NameScope]] = None,
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
        if isinstance(s, ast.Assign) and is_text(s.value):
            constants.update((t.id, s.value) for t in s.targets if isinstance(t, ast.Name))
        elif isinstance(s, ast.AnnAssign) and s.value is not None and is_text(s.value) \
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
        resolve = Resolver(scope, module_scope, n.lineno)
        with_args = short(template_of(message, resolve).text)
        without = short(template_of(message, _with_defaults(resolve, defaults)).text)
        if _worth(with_args):
            templates.append(with_args)
        if _worth(without):
            bare.append(without)
    if not templates and not bare:
        return None
    return Builder(cls.name, cls.lineno, "exception", tuple(dict.fromkeys(templates)), tuple(dict.fromkeys(bare)))
