"""The names a guard's term reads (`self.parallel_config.x`, `envs.VLLM_X`, `hf_config.y`), each
with the attribute chain it is, from a term parsed within bounds (a term too long or nested too
deep is not parsed: counted, never guessed)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import lru_cache
from typing import Optional

from kb.scan.limits import nesting_ok

MAX_TERM = 5000  # characters of a guard term parsed (the scan keeps none longer)
MAX_NESTING = 100  # levels of a term's syntax tree walked

BUILTINS = frozenset({"len", "isinstance", "hasattr", "getattr", "any", "all", "str", "int", "float", "bool", "type",
                       "list", "dict", "set", "tuple", "min", "max", "sum", "sorted", "callable", "issubclass",
                       "None", "True", "False", "self", "cls", "range", "zip", "enumerate", "repr", "abs", "round",
                       "frozenset", "iter", "next", "id", "vars", "super", "object", "print", "map", "filter"})


# --- references in a guard ------------------------------------------------------------------------
@lru_cache(maxsize=65536)
def parse_term(text: str) -> Optional[ast.expr]:
    if len(text) > MAX_TERM:
        return None
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return node if nesting_ok(node, MAX_NESTING) else None  # nested deeper than kb walks: not followed


def attribute_chain(node: ast.expr) -> Optional[tuple[str, ...]]:
    """`self.parallel_config.x` -> ("self", "parallel_config", "x"); a call `a.f()` ends in "f()"."""
    parts: list[str] = []
    while True:
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)) and not parts:
            inner = attribute_chain(node.func)
            if inner is None:
                return None
            return (*inner[:-1], inner[-1] + "()")
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Name):
            parts.append(node.id)
            return tuple(reversed(parts))
        else:
            return None


def named_attribute(node: ast.AST) -> Optional[tuple[str, ...]]:
    """`getattr(x.y, "z", d)` or `hasattr(x.y, "z")` -> ("x", "y", "z"); else None."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
            and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str) and node.args[1].value.isidentifier()):
        return None
    inner = attribute_chain(node.args[0])
    return None if inner is None else (*inner, node.args[1].value)


def references(node: ast.AST, bound: frozenset[str] = frozenset()) -> Iterator[tuple[tuple[str, ...], ast.expr]]:
    """The maximal attribute chains a node reads, outermost first; builtins' arguments are read,
    and of a comprehension the collections it walks (its own loop names are `bound`)."""
    named = named_attribute(node)
    if named is not None and named[0] not in bound and isinstance(node, ast.Call):  # getattr(config, "x"): config.x
        yield named, node
        for a in node.args[2:]:
            yield from references(a, bound)
        return
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in BUILTINS:
        for a in [*node.args, *(k.value for k in node.keywords)]:
            yield from references(a, bound)
        return
    if isinstance(node, (ast.Attribute, ast.Name, ast.Call)):
        parts = attribute_chain(node)
        if parts is not None:
            if not (len(parts) == 1 and parts[0] in BUILTINS) and parts[0] not in bound:
                yield parts, node
            if isinstance(node, ast.Call):
                for a in [*node.args, *(k.value for k in node.keywords)]:
                    yield from references(a, bound)
            return
    if isinstance(node, ast.GeneratorExp | ast.ListComp | ast.SetComp | ast.DictComp):
        inner = set(bound)
        for gen in node.generators:
            yield from references(gen.iter, frozenset(inner))
            inner |= {n.id for n in ast.walk(gen.target) if isinstance(n, ast.Name)}
            for cond in gen.ifs:
                yield from references(cond, frozenset(inner))
        for part in ([node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]):
            yield from references(part, frozenset(inner))
        return
    if isinstance(node, ast.Lambda):
        return
    for child in ast.iter_child_nodes(node):
        yield from references(child, bound)
