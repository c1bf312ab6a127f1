"""What the scan of an untrusted tree bounds: how deep an expression may nest and how long a
text may be before its statement is skipped with a located warning (`Unscannable`), checked
once per node while a file is walked."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Optional, Union

from kb.scan.calls import remembered

FuncNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]
# Deeper expressions (a message of hundreds of `+` terms, a guard, a `for` head, a `msg +=`
# chain) skip their statement with a located warning: rebuilding and unparsing them recurses,
# and so does everything downstream that reads a guard or a template again. Longer texts (a
# message that pulls in a megabyte constant) would be copied into every output of every site.
MAX_NESTING = 100
MAX_TEXT = 5_000  # characters of a message, a guard term, a local's definition, a context head
MAX_CLASS_NAME = 100
DEEP = f"not scanned: an expression here, or a name it reads, nests more than {MAX_NESTING} levels deep"
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
def remembered_nodes() -> Iterator[None]:
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
        raise Unscannable(DEEP)
    return node


def short(text: str) -> str:
    if len(text) > MAX_TEXT:
        raise Unscannable(_LONG)
    return text


def source_of(node: ast.AST) -> str:
    """`ast.unparse`, for a node of bounded nesting and source length only."""
    if not nesting_ok(node):
        raise Unscannable(DEEP)
    return short(ast.unparse(node))
