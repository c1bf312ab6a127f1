"""What a config's code does before a line: the early exits (`if x is None: return`) a value is
read under, and what an `if ... is None:` block fills in (by loops over tables too), as conditions
over the config's own fields."""

from __future__ import annotations

import ast
import copy
from typing import Optional


def exits_before(body: list[ast.stmt], line: int, own: bool = False) -> tuple[str, ...]:
    """The negated tests of the early `return`s before `line` (`if self.speculative_config is None: return None`).
    `own`: the body is a `create_x_config` method, whose loops before an exit may fill the attribute
    the exit tests (`for flag, key, value in (...): ... self.speculative_config = {}`): the test then
    also holds when an item reaches that assignment (_filled_by_loops)."""
    from kb.scan.calls import reached_when

    exits, _ = reached_when(body, line, enclosing=False)
    return tuple(ast.unparse(_filled_by_loops(body, e) if own else e) for e in exits)


def _none_tested(e: ast.expr) -> str:
    """`not self.x is None` or `self.x is not None` -> "x"; else ""."""
    inner, negated = (e.operand, True) if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not) else (e, False)
    if not (isinstance(inner, ast.Compare) and len(inner.ops) == 1 and isinstance(inner.comparators[0], ast.Constant)
            and inner.comparators[0].value is None and isinstance(inner.left, ast.Attribute)
            and isinstance(inner.left.value, ast.Name) and inner.left.value.id == "self"):
        return ""
    if (negated and isinstance(inner.ops[0], ast.Is)) or (not negated and isinstance(inner.ops[0], ast.IsNot)):
        return inner.left.attr
    return ""


def _assigns(node: ast.AST, attr: str) -> bool:
    """The statement assigns `self.<attr>` somewhere inside (not in a nested function)."""
    for n in ast.walk(node):
        targets: list[ast.expr] = []
        if isinstance(n, ast.Assign):
            targets = [t for tg in n.targets for t in (tg.elts if isinstance(tg, ast.Tuple) else [tg])]
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign)):
            targets = [n.target]
        if any(isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name) and t.value.id == "self"
               for t in targets):
            return True
    return False


def _filled_by_loops(body: list[ast.stmt], e: ast.expr) -> ast.expr:
    """The exit's negated test `not self.x is None`, where the loops before the exit fill `self.x`
    with a value that is not None: `<item 1 reaches it> or <item 2 reaches it> or ... or not self.x is None`
    (the items of a literal tuple substituted for the loop's names), so that the test reads what the
    method is given. Unchanged when the method sets the attribute any other way before the exit."""
    attr = _none_tested(e)
    exit_at = next((s for s in body if attr and isinstance(s, ast.If) and _exit_of(s) and
                    _none_tested(_not(s.test)) == attr), None)
    if exit_at is None:
        return e
    reached: list[ast.expr] = []
    for stmt in body:
        if stmt is exit_at:
            break
        if not _assigns(stmt, attr):
            continue
        items = _loop_items(stmt)
        condition = _fills(stmt.body, attr) if items is not None and isinstance(stmt, ast.For) else None
        if items is None or condition is None or not isinstance(stmt, ast.For):
            return e
        for item in items:
            reached.append(_bound_to(condition, stmt.target, item))
    if not reached:
        return e
    return ast.BoolOp(ast.Or(), [*reached, e])


def _not(test: ast.expr) -> ast.expr:
    return ast.UnaryOp(ast.Not(), test)


def _exit_of(stmt: ast.If) -> bool:
    return len(stmt.body) == 1 and isinstance(stmt.body[0], ast.Return) and not stmt.orelse


def _loop_items(stmt: ast.stmt) -> Optional[list[ast.expr]]:
    """The items of `for <names> in (<item>, ...)`: a literal tuple or list, each item a tuple of as
    many parts as the names (or anything, for one name)."""
    if not isinstance(stmt, ast.For) or stmt.orelse or not isinstance(stmt.iter, (ast.Tuple, ast.List)):
        return None
    target = stmt.target
    if isinstance(target, ast.Name):
        return list(stmt.iter.elts)
    if not (isinstance(target, ast.Tuple) and all(isinstance(t, ast.Name) for t in target.elts)):
        return None
    if not all(isinstance(i, ast.Tuple) and len(i.elts) == len(target.elts) for i in stmt.iter.elts):
        return None
    return list(stmt.iter.elts)


_NOT_NONE = (ast.Dict, ast.List, ast.Set, ast.Tuple, ast.DictComp, ast.ListComp, ast.SetComp)


def _fills(body: list[ast.stmt], attr: str) -> Optional[ast.expr]:
    """The condition under which one pass of the loop body reaches `self.<attr> = <a display>`
    (`if value is None: continue` before it: `not value is None`; an `if self.<attr> is None:`
    around it adds nothing, since the attribute is not None after it either way); None when the
    body sets it otherwise, or may leave the loop another way."""
    conditions: list[ast.expr] = []
    for stmt in body:
        if isinstance(stmt, ast.If) and len(stmt.body) == 1 and isinstance(stmt.body[0], ast.Continue)                 and not stmt.orelse and not _assigns(stmt.test, attr):
            conditions.append(_not(stmt.test))
            continue
        if isinstance(stmt, ast.If) and len(stmt.body) == 1 and _is_fill(stmt.body[0], attr) and not stmt.orelse:
            if _none_tested(_not(stmt.test)) != attr:
                conditions.append(stmt.test)
            return ast.BoolOp(ast.And(), conditions) if len(conditions) > 1 else                 conditions[0] if conditions else ast.Constant(True)
        if _is_fill(stmt, attr):
            return ast.BoolOp(ast.And(), conditions) if len(conditions) > 1 else                 conditions[0] if conditions else ast.Constant(True)
        if _assigns(stmt, attr) or any(isinstance(n, (ast.Return, ast.Break, ast.Continue, ast.Yield))
                                       for n in ast.walk(stmt)):
            return None
    return None


def _is_fill(stmt: ast.stmt, attr: str) -> bool:
    return isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Attribute) \
        and stmt.targets[0].attr == attr and isinstance(stmt.targets[0].value, ast.Name) and \
        stmt.targets[0].value.id == "self" and isinstance(stmt.value, _NOT_NONE)


def _bound_to(condition: ast.expr, target: ast.expr, item: ast.expr) -> ast.expr:
    """The condition with the loop's names replaced by the parts of one item."""
    names = [target] if isinstance(target, ast.Name) else list(target.elts) if isinstance(target, ast.Tuple) else []
    parts = [item] if isinstance(target, ast.Name) else list(item.elts) if isinstance(item, ast.Tuple) else []
    values = {n.id: p for n, p in zip(names, parts) if isinstance(n, ast.Name)}

    class _Bind(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.expr:
            return copy.deepcopy(values[node.id]) if node.id in values and isinstance(node.ctx, ast.Load) else node

    out = _Bind().visit(copy.deepcopy(condition))
    assert isinstance(out, ast.expr)
    return out
