"""What a config's properties and small methods compute, as one expression of its fields, read
from the tree: a guard of vLLM's config code that reads `self.parallel_config.use_ubatching` or
`if self._get_model_runner_unsupported_features():` is then compiled over the flags those read
(kb/checks/derive.py), where otherwise it would need a value kb cannot know.

Two shapes are read, in the classes of vllm/config/ (methods that take no argument but `self`):
- one `return <expression>` (after a docstring, imports and locals that name `self.<attribute>`);
- a list collected by `if`s: `out = []`, then `if <test>: out.append(<item>)` or
  `out.extend(self.<method>())` (nested `if`s and `else`s), `logger` calls, then `return out`:
  `([<item>] if <test> else []) + ...`.
Anything else is not summarised."""

from __future__ import annotations

import ast
import copy
from collections.abc import Sequence
from typing import Optional

from kb.config.modules import Modules, module_name

CONFIG_FILES = "vllm/config/"
MAX_SOURCE = 4_000  # characters of one summary


def member_summaries(modules: Modules, paths: Sequence[str]) -> tuple[tuple[str, str, str, str], ...]:
    """(file, class, member, expression): `member` is `name` for a property, `name()` for a method."""
    out: list[tuple[str, str, str, str]] = []
    for path in sorted(p for p in paths if p.startswith(CONFIG_FILES) and p.endswith(".py")):
        module = modules.get(module_name(path))
        if module is None:
            continue
        for cls in module.tree.body:
            if not isinstance(cls, ast.ClassDef):
                continue
            names = [s.name for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
            for fn in cls.body:
                if not isinstance(fn, ast.FunctionDef) or names.count(fn.name) != 1 or not _self_only(fn):
                    continue
                decorators = [ast.unparse(d) for d in fn.decorator_list]
                if decorators not in ([], ["property"]):
                    continue
                summary = summarize(fn)
                if summary is not None and len(summary) <= MAX_SOURCE:
                    out.append((path, cls.name, fn.name if decorators else f"{fn.name}()", summary))
    return tuple(out)


def _self_only(fn: ast.FunctionDef) -> bool:
    a = fn.args
    return len(a.args) == 1 and a.args[0].arg == "self" and not (a.posonlyargs or a.kwonlyargs or a.vararg or a.kwarg)


def summarize(fn: ast.FunctionDef) -> Optional[str]:
    """The function's result as one expression, or None when it is not of a shape read."""
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    aliases: dict[str, ast.expr] = {}
    assigned = _assigned_names(fn)
    while body and (isinstance(body[0], (ast.Import, ast.ImportFrom)) or _alias(body[0], assigned) is not None):
        found = _alias(body[0], assigned)
        if found is not None:
            aliases[found[0]] = found[1]
        body = body[1:]
    if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
        return source_of(body[0].value, aliases)
    if len(body) < 2 or not isinstance(body[-1], ast.Return) or not isinstance(body[-1].value, ast.Name):
        return None
    name = body[-1].value.id
    first = body[0]
    start = first.value if isinstance(first, (ast.Assign, ast.AnnAssign)) else None
    target = first.targets[0] if isinstance(first, ast.Assign) and len(first.targets) == 1 else \
        first.target if isinstance(first, ast.AnnAssign) else None
    if not (isinstance(target, ast.Name) and target.id == name and isinstance(start, ast.List) and not start.elts):
        return None
    if assigned.count(name) != 1:
        return None
    result = collected(body[1:-1], name, aliases, assigned)
    if result is None:
        return None
    return source_of(result, aliases)


def _assigned_names(fn: ast.FunctionDef) -> list[str]:
    return [n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)]


def _alias(stmt: ast.stmt, assigned: list[str]) -> Optional[tuple[str, ast.expr]]:
    """`parallel_config = self.parallel_config`: (name, `self.parallel_config`), when assigned once."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) and \
            assigned.count(stmt.targets[0].id) == 1 and _on_self(stmt.value):
        return stmt.targets[0].id, stmt.value
    return None


def _on_self(node: ast.expr) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id == "self"


def collected(body: list[ast.stmt], name: str, aliases: dict[str, ast.expr], assigned: list[str]) -> Optional[ast.expr]:
    """The list the statements add to `name`, as `[a] + (b if t else []) + ...`; None when they do
    anything else with it (or anything else at all, but log and name `self.<attribute>`)."""
    parts: list[ast.expr] = []
    for stmt in body:
        found = _alias(stmt, assigned)
        if found is not None:
            aliases[found[0]] = found[1]
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute):
            call = stmt.value
            func = call.func
            assert isinstance(func, ast.Attribute)
            on = func.value
            if isinstance(on, ast.Name) and on.id == name and func.attr in ("append", "extend") and \
                    len(call.args) == 1 and not call.keywords:
                item = call.args[0]
                if _mentions(item, name):
                    return None
                parts.append(ast.List([item], ast.Load()) if func.attr == "append" else
                             ast.Call(ast.Name("list", ast.Load()), [item], []))
                continue
            if isinstance(on, ast.Name) and on.id == "logger":
                continue
            return None
        if isinstance(stmt, ast.If) and not _mentions(stmt.test, name):
            then = collected(stmt.body, name, aliases, assigned)
            otherwise = collected(stmt.orelse, name, aliases, assigned) if stmt.orelse else ast.List([], ast.Load())
            if then is None or otherwise is None:
                return None
            if _empty(then) and _empty(otherwise):
                continue
            parts.append(ast.IfExp(stmt.test, then, otherwise))
            continue
        if isinstance(stmt, ast.Pass):
            continue
        return None
    if not parts:
        return ast.List([], ast.Load())
    out = parts[0]
    for p in parts[1:]:
        out = ast.BinOp(out, ast.Add(), p)
    return out


def _empty(node: ast.expr) -> bool:
    return isinstance(node, ast.List) and not node.elts


def _mentions(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def source_of(node: ast.expr, aliases: dict[str, ast.expr]) -> Optional[str]:
    class _Swap(ast.NodeTransformer):
        def visit_Name(self, n: ast.Name) -> ast.expr:
            return copy.deepcopy(aliases[n.id]) if n.id in aliases and isinstance(n.ctx, ast.Load) else n

    if any(isinstance(n, (ast.Lambda, ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)) for n in ast.walk(node)):
        return None
    swapped = _Joined().visit(_Swap().visit(copy.deepcopy(node)))
    try:
        return ast.unparse(ast.fix_missing_locations(swapped))
    except (ValueError, RecursionError):
        return None


class _Joined(ast.NodeTransformer):
    """An f-string as `"text" + str(value) + ...` (what kb's evaluator computes); a part it cannot
    write so (a format spec, `!r`) stays as its source, `{...}`, the way kb shows an unfilled part."""

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.expr:
        parts: list[ast.expr] = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(v)
            elif isinstance(v, ast.FormattedValue) and v.format_spec is None and v.conversion in (-1, ord("s")):
                parts.append(ast.Call(ast.Name("str", ast.Load()), [self.visit(v.value)], []))
            else:
                parts.append(ast.Constant("{" + ast.unparse(v.value if isinstance(v, ast.FormattedValue) else v) + "}"))
        if not parts:
            return ast.Constant("")
        out = parts[0] if not isinstance(parts[0], ast.Call) else ast.BinOp(ast.Constant(""), ast.Add(), parts[0])
        for p in parts[1:]:
            out = ast.BinOp(out, ast.Add(), p)
        return out
