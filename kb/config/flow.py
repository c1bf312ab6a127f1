"""Where a function of vLLM's config code reads what it reads, read from the tree, so that a
derived check reads each value as it is at that point (kb/checks/derive.py):

- the line of each early exit (`if cache_config._extensible_kv_cache_resolved: return`): its test
  reads the fields before the assignments after it in the same function;
- a local that an `if` / `elif` / `else` chain assigns (`unsupported = None`, then `if a:
  unsupported = "..." elif b: unsupported = "..."`): one conditional expression,
  `"..." if a else "..." if b else None`, where otherwise the local may hold either value;
- a list that `if`s append to (`blockers = []`, then `if a: blockers.append("...")`):
  `(["..."] if a else []) + ...`, where the scan sees only its first value, `[]`.

For the functions of vllm/config/ and vllm/engine/arg_utils.py (`Class.method` or `function`)."""

from __future__ import annotations

import ast
import contextlib
import copy
from collections.abc import Iterator, Sequence
from typing import Optional

from kb.config.members import collected, source_of
from kb.config.modules import Modules, module_name

LAUNCH_FILES = ("vllm/config/", "vllm/engine/arg_utils.py", "vllm/sampling_params.py")  # and the request model
MAX_SOURCE = 4_000


def function_flow(modules: Modules, paths: Sequence[str]) -> tuple[tuple[tuple[str, str, int, str], ...],
                                                                     tuple[tuple[str, str, str, int, int, str], ...]]:
    """((file, qualname, line, negated test) of each early exit; (file, qualname, local, first line,
    last line, expression) of each local an if-chain assigns)."""
    exits: list[tuple[str, str, int, str]] = []
    chains: list[tuple[str, str, str, int, int, str]] = []
    for path in sorted(p for p in paths if p.startswith(LAUNCH_FILES) and p.endswith(".py")):
        module = modules.get(module_name(path))
        if module is None:
            continue
        for qualname, fn in _functions(module.tree):
            exits += [(path, qualname, line, text) for line, text in _exits(fn)]
            chains += [(path, qualname, *c) for c in (*_chains(fn), *_collectors(fn))]
    return tuple(exits), tuple(chains)


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for inner in node.body:
                if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{node.name}.{inner.name}", inner


def _negated(test: ast.expr) -> ast.expr:
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return test.operand
    return ast.UnaryOp(ast.Not(), test)


def _exits(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[tuple[int, str]]:
    """(line, negated test) of each `if <test>: return` (a body ending in `return`, no `else`),
    at any depth of the function but not in a nested function; a test found twice is left out."""
    found: dict[str, list[int]] = {}
    stack: list[ast.AST] = list(fn.body)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(n, ast.If) and n.body and isinstance(n.body[-1], ast.Return) and not n.orelse:
            with contextlib.suppress(ValueError, RecursionError):
                found.setdefault(ast.unparse(_negated(n.test)), []).append(n.lineno)
        stack.extend(ast.iter_child_nodes(n))
    return sorted((lines[0], text) for text, lines in found.items() if len(lines) == 1 and len(text) <= MAX_SOURCE)


def _chains(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[tuple[str, int, int, str]]:
    """(local, first line, last line, expression) for `x = <start>` at the function's top level,
    followed (later at the same level) by one `if`/`elif`/`else` chain whose every branch is the one
    statement `x = <value>`, where nothing else assigns x."""
    stores: dict[str, int] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            stores[n.id] = stores.get(n.id, 0) + 1
    out: list[tuple[str, int, int, str]] = []
    body = fn.body
    for i, stmt in enumerate(body):
        if not (isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None):
            continue
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else \
            stmt.target if isinstance(stmt, ast.AnnAssign) else None
        if not isinstance(target, ast.Name):
            continue
        name = target.id
        chain = next((s for s in body[i + 1:] if _assigns(s, name)), None)
        if not isinstance(chain, ast.If):
            continue
        expression = _chain_value(chain, name, stmt.value)
        if expression is None or stores.get(name, 0) != 1 + _branches(chain):
            continue
        try:
            text = ast.unparse(expression)
        except (ValueError, RecursionError):
            continue
        if len(text) <= MAX_SOURCE:
            out.append((name, stmt.lineno, chain.end_lineno or chain.lineno, text))
    return out


def _collectors(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[tuple[str, int, int, str]]:
    """(local, first line, last line, expression) for `x = []` at the function's top level, then
    `if`s that append to it (kb.config.members' shape; other locals assigned once on the way are
    written out), up to the first statement that reads it otherwise, after which nothing adds to it."""
    assigned = [n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)]
    out: list[tuple[str, int, int, str]] = []
    body = fn.body
    for i, stmt in enumerate(body):
        value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else \
            stmt.target if isinstance(stmt, ast.AnnAssign) else None
        if not (isinstance(target, ast.Name) and isinstance(value, ast.List) and not value.elts) or \
                assigned.count(target.id) != 1:
            continue
        name = target.id
        locals_: dict[str, ast.expr] = {}
        parts: list[ast.expr] = []
        last = stmt.end_lineno or stmt.lineno
        rest: list[ast.stmt] = []
        for j, later in enumerate(body[i + 1:]):
            if not _reads(later, name):
                if isinstance(later, ast.Assign) and len(later.targets) == 1 and isinstance(later.targets[0], ast.Name) \
                        and assigned.count(later.targets[0].id) == 1:
                    locals_[later.targets[0].id] = later.value
                continue
            part = collected([later], name, {}, assigned)
            if part is None:
                rest = body[i + 1 + j:]
                break
            parts.append(part)
            last = later.end_lineno or later.lineno
        if not parts or any(_changes(s, name) for s in rest):
            continue
        expression: ast.expr = parts[0]
        for p in parts[1:]:
            expression = ast.BinOp(expression, ast.Add(), p)
        text = source_of(expression, _written_out(locals_))
        if text is not None and len(text) <= MAX_SOURCE:
            out.append((name, stmt.lineno, last, text))
    return out


def _written_out(locals_: dict[str, ast.expr]) -> dict[str, ast.expr]:
    """Each local's value with the locals assigned before it written out."""
    out: dict[str, ast.expr] = {}

    class _Swap(ast.NodeTransformer):
        def visit_Name(self, n: ast.Name) -> ast.expr:
            return copy.deepcopy(out[n.id]) if n.id in out and isinstance(n.ctx, ast.Load) else n

    for name, value in locals_.items():
        swapped = _Swap().visit(copy.deepcopy(value))
        if isinstance(swapped, ast.expr):
            out[name] = swapped
    return out


def _changes(stmt: ast.stmt, name: str) -> bool:
    """The statement adds to the list `name` or assigns it."""
    for n in ast.walk(stmt):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) and \
                n.func.value.id == name and n.func.attr not in ("copy", "count", "index"):
            return True
        if isinstance(n, (ast.Name, ast.Subscript)) and not isinstance(n.ctx, ast.Load) and \
                (n.id if isinstance(n, ast.Name) else ast.unparse(n.value)) == name:
            return True
    return False


def _assigns(stmt: ast.stmt, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load) for n in ast.walk(stmt))


def _branches(chain: ast.If) -> int:
    count = 1
    rest = chain.orelse
    while rest:
        count += 1
        if len(rest) == 1 and isinstance(rest[0], ast.If):
            rest = rest[0].orelse
        else:
            break
    return count


def _single(body: list[ast.stmt], name: str) -> Optional[ast.expr]:
    if len(body) == 1 and isinstance(body[0], ast.Assign) and len(body[0].targets) == 1 and \
            isinstance(body[0].targets[0], ast.Name) and body[0].targets[0].id == name:
        return body[0].value
    return None


def _chain_value(chain: ast.If, name: str, start: ast.expr) -> Optional[ast.expr]:
    value = _single(chain.body, name)
    if value is None or _reads(chain.test, name) or _reads(value, name):
        return None
    if not chain.orelse:
        otherwise: Optional[ast.expr] = start
    elif len(chain.orelse) == 1 and isinstance(chain.orelse[0], ast.If):
        otherwise = _chain_value(chain.orelse[0], name, start)
    else:
        otherwise = _single(chain.orelse, name)
        if otherwise is not None and _reads(otherwise, name):
            return None
    if otherwise is None:
        return None
    return ast.IfExp(chain.test, value, otherwise)


def _reads(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))
