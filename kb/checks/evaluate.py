"""Our own small evaluator for check expressions: Python expression syntax over a whitelist
of node types. Never `eval`/`exec`: anything outside the whitelist is a located error.

Also translates the same expressions to a JSON tree that the site's checker script
interprets with the same semantics (static/check.js), so the page and `kb check` are driven
by one source.
"""

from __future__ import annotations

import ast
import copy
import functools
import math
import operator
import threading
from collections import ChainMap, OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Optional

from kb.errors import ExprError, MissingInput, WorkBudgetExceeded


def _int(x: Any) -> int:
    return int(x)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min, "max": max, "len": len, "abs": abs, "int": _int, "float": float, "str": str, "bool": bool,
}
# What a check derived from vLLM's guard may also call (kb/checks/derive.py): builtins over plain
# values, `isinstance` against plain types, and a few methods of str and dict. Curated checks keep
# FUNCTIONS, which the site's checker script also knows.
def _math(test: Callable[[float], bool], on_int: bool) -> Callable[[Any], bool]:
    """`math.isfinite` and friends over a plain number (an int is finite however large)."""
    def call(value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"must be a real number, not {type(value).__name__}")
        return on_int if isinstance(value, int) else test(value)
    return call


# `math.isfinite(x)` in vLLM's guard, as the compiler writes it (kb/checks/derive.py MATH_CALLS)
MATH_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "math_isfinite": _math(math.isfinite, True), "math_isinf": _math(math.isinf, False),
    "math_isnan": _math(math.isnan, False),
}
DERIVED_FUNCTIONS: dict[str, Callable[..., Any]] = {
    **FUNCTIONS, "set": set, "tuple": tuple, "list": list, "sorted": sorted, "any": any, "all": all, "sum": sum,
    "isinstance": isinstance, **MATH_FUNCTIONS,
}
TYPES: dict[str, type] = {"int": int, "float": float, "str": str, "bool": bool, "dict": dict, "list": list,
                          "tuple": tuple, "set": set}
METHODS: dict[type, frozenset[str]] = {
    str: frozenset({"lower", "upper", "strip", "startswith", "endswith", "removeprefix", "removesuffix", "split",
                    "isdigit", "casefold", "join"}),
    dict: frozenset({"get", "keys", "values", "items"}),
}
ALL_METHODS = frozenset().union(*METHODS.values())
_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_CMPOPS: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_, ast.IsNot: operator.is_not,
}
_NAMES = {"+": ast.Add, "-": ast.Sub, "*": ast.Mult, "/": ast.Div, "//": ast.FloorDiv, "%": ast.Mod, "**": ast.Pow}
_OP_SYMBOL = {v: k for k, v in _NAMES.items()}
_CMP_SYMBOL = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
               ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}
# Bounds that keep every evaluation small and quick, whatever the expression (a curated check,
# or vLLM's scanned guard with the bindings substituted): its source, nesting and size, and
# every value computed on the way (an int's bits, a string's characters, a sequence's items).
MAX_SOURCE = 10_000
MAX_DEPTH = 100
MAX_NODES = 5_000
MAX_INT_BITS = 4_096
MAX_SIZE = 100_000
MAX_WORK = 5_000_000  # units of size computed in one evaluation: bounds the time of a wide expression
_work = threading.local()  # what is left of MAX_WORK in the evaluation under way
# A whole command's bound on each derived check (`holds`, `evaluate(derived=True)`): the example fix
# search and the valid values evaluate one guard thousands of times. The steps of all its evaluations
# in one command (units of MAX_WORK, plus NODE_STEPS for each part of the expression) are counted per
# expression; past COMMAND_WORK it is dropped for the rest of the command (WorkBudgetExceeded). vLLM
# 0.34.0's costliest guard takes under 3 million in a build's whole fix search; a hostile one stops
# after some seconds. Evaluations are also kept (the last CACHED, by expression and values).
COMMAND_WORK = 10_000_000
NODE_STEPS = 10
CACHED = 8192


def parse(source: str) -> ast.expr:
    """Parse and check against the whitelist; raises ExprError naming the offending part. The
    tree is shared between callers (kept per source text): it is read, never changed."""
    return _parse_checked(source, False)


@lru_cache(maxsize=4096)
@functools.lru_cache(maxsize=4096)
def _parse_checked(source: str, derived: bool) -> ast.expr:
    """Parsed and whitelisted once per text: the evaluator never changes the tree it walks."""
    node = _parsed(source)
    check_whitelist(node, derived)
    return node


def _parsed(source: str) -> ast.expr:
    text = source.strip()
    if len(text) > MAX_SOURCE:
        raise ExprError(f"expression too long: {len(text)} characters (at most {MAX_SOURCE})")
    try:
        return ast.parse(text, mode="eval").body
    except SyntaxError as e:
        raise ExprError(f"not a Python expression: {e.msg} in {_short(source)!r}") from None
    except (RecursionError, MemoryError):
        raise ExprError(f"expression nested too deeply (at most {MAX_DEPTH} levels)") from None


def shorten(text: str, limit: int = 200) -> str:
    """The text, cut with an ellipsis when longer than `limit` characters (for messages)."""
    return _short(text, limit)


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def check_shape(node: ast.AST) -> None:
    """Nesting and node count within bounds (measured without recursion, before anything
    recursive, such as evaluating or unparsing, touches the tree)."""
    count = 0
    stack = [(node, 1)]
    while stack:
        n, depth = stack.pop()
        count += 1
        if depth > MAX_DEPTH:
            raise ExprError(f"expression nested too deeply (more than {MAX_DEPTH} levels)")
        if count > MAX_NODES:
            raise ExprError(f"expression too large (more than {MAX_NODES} parts)")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(n))


def check_whitelist(node: ast.AST, derived: bool = False) -> None:
    """`derived`: the wider set of a check derived from vLLM's guard (DERIVED_FUNCTIONS, METHODS)."""
    check_shape(node)
    functions = DERIVED_FUNCTIONS if derived else FUNCTIONS
    methods: set[int] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            if n.id.startswith("__"):
                raise ExprError(f"dunder names are not allowed: {n.id}")
        elif isinstance(n, ast.Call):
            method = derived and isinstance(n.func, ast.Attribute) and n.func.attr in ALL_METHODS
            if method:
                methods.add(id(n.func))
            elif not isinstance(n.func, ast.Name) or n.func.id not in functions:
                raise ExprError(f"only calls of {', '.join(sorted(functions))} are allowed: {ast.unparse(n)}")
            if n.keywords or any(isinstance(a, ast.Starred) for a in n.args):
                raise ExprError(f"calls take plain positional arguments only: {ast.unparse(n)}")
        elif isinstance(n, ast.Attribute):
            if id(n) not in methods:
                raise ExprError(f"attribute access is not allowed: {ast.unparse(n)}")
        elif isinstance(n, ast.BinOp):
            if type(n.op) not in _BINOPS:
                raise ExprError(f"operator not allowed: {ast.unparse(n)}")
            if isinstance(n.op, ast.Mod) and isinstance(n.left, ast.Constant) and isinstance(n.left.value, str):
                raise ExprError(_NO_FORMATTING.format(_short(ast.unparse(n))))
        elif isinstance(n, ast.Constant):
            if not isinstance(n.value, (int, float, str, bool, type(None))):
                raise ExprError(f"constant not allowed: {_short(ast.unparse(n))}")
            if isinstance(n.value, float) and not math.isfinite(n.value):
                raise ExprError(f"not a finite number: {_short(ast.unparse(n))}")
            _bounded(n.value)
        elif derived and isinstance(n, _COMPREHENSIONS):
            for gen in n.generators:
                if gen.is_async or not all(isinstance(t, (ast.Name, ast.Tuple, ast.Store)) for t in ast.walk(gen.target)):
                    raise ExprError(f"only plain loop names are allowed: {_short(ast.unparse(n))}")
        elif not isinstance(n, _ALLOWED) and not (derived and isinstance(n, _DERIVED_ONLY)):
            raise ExprError(f"{type(n).__name__} is not allowed: {ast.unparse(n) if isinstance(n, ast.expr) else ''}")


_NO_FORMATTING = "string formatting with `%` is not allowed: {!r}"
_COMPREHENSIONS = (ast.GeneratorExp, ast.ListComp, ast.SetComp)
_DERIVED_ONLY = (ast.comprehension, ast.Store, ast.Slice)  # parts of a comprehension, `x[1:]`
_ALLOWED = (ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd, ast.Compare, ast.IfExp,
            ast.List, ast.Tuple, ast.Set, ast.Load, ast.Subscript, ast.Expression, ast.Name, ast.Constant, ast.Call,
            ast.BinOp, *(_CMPOPS.keys()), *(_BINOPS.keys()))


def evaluate(expr: str | ast.expr, env: Mapping[str, Any], derived: bool = False) -> Any:
    """`derived`: a check derived from vLLM's guard, with its wider whitelist (check_whitelist);
    kept, and counted against the command's work budget (`work_budget`)."""
    if derived and isinstance(expr, str):
        return _budgeted("evaluate", expr, env, _evaluate_derived)
    return _evaluate(expr, env, derived)


def _evaluate_derived(expr: str, env: Mapping[str, Any]) -> Any:
    return _evaluate(expr, env, True)


def _evaluate(expr: str | ast.expr, env: Mapping[str, Any], derived: bool) -> Any:
    node = _parse_checked(expr, derived) if isinstance(expr, str) else expr
    if not isinstance(expr, str):
        check_whitelist(node, derived)
    _work.left = MAX_WORK
    try:
        return _eval(node, {**TYPES, **env} if derived else env)
    except ExprError:
        raise
    except (TypeError, ValueError, ZeroDivisionError, KeyError, IndexError, OverflowError, MemoryError,
            RecursionError) as e:
        raise ExprError(f"{type(e).__name__}: {_short(str(e))} in {_short(ast.unparse(node))!r}") from None


def holds(expr: str, env: Mapping[str, Any]) -> bool:
    """Whether a derived check's condition holds, read the way a condition is (three-valued):
    `a or b` holds when b does, whatever a is; `a and b` fails when b does. MissingInput only
    when the values given do not decide it (kb/checks/derive.py). Kept, and counted against the
    command's work budget (`work_budget`)."""
    return bool(_budgeted("holds", expr, env, _holds))


def _holds(expr: str, env: Mapping[str, Any]) -> bool:
    node = _parse_checked(expr, True)
    _work.left = MAX_WORK
    try:
        return _truth(node, {**TYPES, **env})
    except ExprError:
        raise
    except (TypeError, ValueError, ZeroDivisionError, KeyError, IndexError, OverflowError, MemoryError,
            RecursionError) as e:
        raise ExprError(f"{type(e).__name__}: {_short(str(e))} in {_short(ast.unparse(node))!r}") from None


# --- a whole command's work budget, and the evaluations kept ---------------------------------------
class _Ledger:
    """The steps each derived expression has taken in the command under way, and those dropped."""

    def __init__(self) -> None:
        self.spent: dict[str, int] = {}
        self.dropped: set[str] = set()


_command = threading.local()  # the ledger of the command under way in this thread (none: no budget)
_kept: OrderedDict[tuple[str, str, Any], tuple[bool, Any]] = OrderedDict()
_kept_lock = threading.Lock()


@contextmanager
def work_budget() -> Iterator[None]:
    """The scope of one command (`kb check`, a build's derived guidance): each derived expression
    may take COMMAND_WORK steps in all. Nested scopes share the outer one's ledger."""
    if getattr(_command, "ledger", None) is not None:
        yield
        return
    _command.ledger = _Ledger()
    try:
        yield
    finally:
        _command.ledger = None


def dropped(expr: str) -> bool:
    """The derived expression is past the work budget of the command under way."""
    ledger: Optional[_Ledger] = getattr(_command, "ledger", None)
    return ledger is not None and expr in ledger.dropped


def _budgeted(kind: str, expr: str, env: Mapping[str, Any], run: Callable[[str, Mapping[str, Any]], Any]) -> Any:
    """`run(expr, env)`, kept by (expr, values), its steps counted against the command's budget."""
    ledger: Optional[_Ledger] = getattr(_command, "ledger", None)
    if ledger is not None and expr in ledger.dropped:
        raise WorkBudgetExceeded()
    key = (kind, expr, _frozen(env))
    if key[2] is not _UNKEPT:
        with _kept_lock:
            kept = _kept.get(key)
            if kept is not None:
                _kept.move_to_end(key)
        if kept is not None:
            if kept[0]:
                return copy.deepcopy(kept[1]) if isinstance(kept[1], (list, dict, set)) else kept[1]
            raise kept[1].with_traceback(None)
    ok, result = True, None
    _work.left = MAX_WORK
    try:
        result = run(expr, env)
    except ExprError as e:
        ok, result = False, e
    if ledger is not None:
        spent = ledger.spent.get(expr, 0) + MAX_WORK - getattr(_work, "left", MAX_WORK) + NODE_STEPS * _nodes(expr)
        ledger.spent[expr] = spent
        if spent > COMMAND_WORK:
            ledger.dropped.add(expr)
    if key[2] is not _UNKEPT:
        with _kept_lock:
            _kept[key] = (ok, copy.deepcopy(result) if isinstance(result, (list, dict, set)) else result)
            if len(_kept) > CACHED:
                _kept.popitem(last=False)
    if not ok:
        assert isinstance(result, ExprError)
        raise result
    return result


@functools.lru_cache(maxsize=4096)
def _nodes(expr: str) -> int:
    return sum(1 for _ in ast.walk(_parse_checked(expr, True)))


_UNKEPT = object()  # values that cannot be frozen: evaluated every time
_FROZEN_ITEMS = 1_000  # values larger than this are not kept


def _frozen(env: Mapping[str, Any]) -> Any:
    """The values as a hashable key, each with its type (`1`, `1.0` and `True` are equal, but
    `isinstance` tells them apart); _UNKEPT for a value kb does not freeze (more than
    _FROZEN_ITEMS values in all, a nan, an unhashable one)."""
    out: list[tuple[str, Any]] = []
    count = [0]
    try:
        for k, v in env.items():
            t = type(v)
            if t is str or t is int or t is bool or v is None:  # most values: frozen here, without a call
                count[0] += 1
                out.append((k, (t, v)))
            else:
                out.append((k, _freeze(v, count)))
        if count[0] > _FROZEN_ITEMS:
            return _UNKEPT
        out.sort(key=_first)
        return tuple(out)
    except (TypeError, RecursionError):
        return _UNKEPT


def _first(kv: tuple[str, Any]) -> str:
    return kv[0]


def _freeze(v: Any, count: list[int]) -> Any:
    count[0] += 1
    if count[0] > _FROZEN_ITEMS:
        raise TypeError
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_freeze(x, count) for x in v))
    if isinstance(v, (set, frozenset)):
        return (type(v).__name__, frozenset(_freeze(x, count) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple((_freeze(k, count), _freeze(x, count)) for k, x in v.items()))
    if isinstance(v, float) and v != v:
        raise TypeError  # nan: never equal to itself
    hash(v)
    return (type(v), v)


def _truth(n: ast.expr, env: Mapping[str, Any]) -> bool:
    """The truth of a condition: an operand of `and` / `or` that is not known does not hide one
    that decides (a known False of `and`, a known True of `or`). An operand that fails after an
    unknown one leaves `or` undecided (vLLM may fail there instead) and `and` false or failing."""
    if isinstance(n, ast.BoolOp):
        decides = not isinstance(n.op, ast.And)  # the truth that decides: False for `and`, True for `or`
        missing: Optional[MissingInput] = None
        failed = False
        for v in n.values:
            try:
                t = _truth(v, env)
            except MissingInput as e:
                missing = missing or e
                continue
            except (ExprError, TypeError, ValueError, ZeroDivisionError, KeyError, IndexError):
                if missing is None:
                    raise  # Python evaluates it too: it fails there
                failed = True  # evaluated only for some values of the unknown one
                continue
            if t == decides:
                if failed and decides and missing is not None:
                    raise missing  # `or`: vLLM may fail on the operand kb could not evaluate first
                return decides
        if missing is not None:
            raise missing
        return not decides
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
        return not _truth(n.operand, env)
    if isinstance(n, ast.IfExp):
        return _truth(n.body, env) if _truth(n.test, env) else _truth(n.orelse, env)
    if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add) and _listed(n):
        # lists joined: not empty when one of them is not (kb.config.members' collected lists)
        return _truth(ast.BoolOp(ast.Or(), [n.left, n.right]), env)
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "list" and len(n.args) == 1 and \
            _listed(n.args[0]):
        return _truth(n.args[0], env)
    return bool(_eval(n, env))


def _listed(n: ast.expr) -> bool:
    """Written so that it can only be a list: a list display, `list(...)`, a conditional expression
    or a `+` of such."""
    if isinstance(n, ast.List):
        return True
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "list":
        return True
    if isinstance(n, ast.IfExp):
        return _listed(n.body) and _listed(n.orelse)
    if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add):
        return _listed(n.left) and _listed(n.right)
    return False


def _eval(n: ast.expr, env: Mapping[str, Any]) -> Any:
    if isinstance(n, ast.Constant):
        return n.value
    if isinstance(n, ast.Name):
        if n.id in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[n.id]
        if n.id not in env:
            raise MissingInput(n.id)
        return env[n.id]
    if isinstance(n, ast.BoolOp):
        if isinstance(n.op, ast.And):
            value: Any = True
            for v in n.values:
                value = _eval(v, env)
                if not value:
                    return value
            return value
        value = False
        for v in n.values:
            value = _eval(v, env)
            if value:
                return value
        return value
    if isinstance(n, ast.UnaryOp):
        if isinstance(n.op, ast.Not):
            return not _truth(n.operand, env)
        v = _eval(n.operand, env)
        return -v if isinstance(n.op, ast.USub) else +v
    if isinstance(n, ast.BinOp):
        left, right = _eval(n.left, env), _eval(n.right, env)
        _check_operands(n, left, right)
        return _computed(_BINOPS[type(n.op)](left, right), n)
    if isinstance(n, ast.Compare):
        left = _eval(n.left, env)
        for op, comparator in zip(n.ops, n.comparators):
            right = _eval(comparator, env)
            if isinstance(right, (list, tuple, set, frozenset, dict, str)) or isinstance(left, (list, tuple, dict)):
                _spent(_size(right) + _size(left))  # `in` and `==` walk what they compare
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(n, ast.IfExp):
        return _eval(n.body, env) if _truth(n.test, env) else _eval(n.orelse, env)
    if isinstance(n, (ast.List, ast.Tuple)):
        items = [_eval(e, env) for e in n.elts]
        return _computed(items if isinstance(n, ast.List) else tuple(items), n)
    if isinstance(n, ast.Set):
        return _computed({_eval(e, env) for e in n.elts}, n)
    if isinstance(n, ast.Subscript):
        container = _eval(n.value, env)
        if isinstance(n.slice, ast.Slice):  # only in a derived check
            parts = [None if p is None else _eval(p, env) for p in (n.slice.lower, n.slice.upper, n.slice.step)]
            return _computed(container[slice(*parts)], n)
        return container[_eval(n.slice, env)]
    if isinstance(n, _COMPREHENSIONS):  # only in a derived check: its items, made one by one and counted
        items = list(_comprehension(n.elt, n.generators, env))
        return _computed(set(items) if isinstance(n, ast.SetComp) else items, n)
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
        args = [_eval(a, env) for a in n.args]
        if n.func.id == "str":
            for a in args:
                _check_size(10 * _spent(_size(a)) + 10, n)  # str() of a value: at most ten characters per unit
        if n.func.id == "isinstance" and not (len(args) == 2 and _plain_types(args[1])):
            raise ExprError(f"isinstance against {_short(ast.unparse(n.args[-1]))}: only plain types are known")
        if n.func.id in ("set", "tuple", "list", "sorted", "sum", "any", "all"):
            for a in args:
                _spent(_size(a))
        if n.func.id == "sum" and ((len(args) > 1 and not isinstance(args[1], (int, float))) or
                                   (len(args) == 1 and any(not isinstance(x, (int, float)) for x in args[0]))):
            raise ExprError(f"sum of other than numbers in {_short(ast.unparse(n))!r}")
        return _computed(DERIVED_FUNCTIONS[n.func.id](*args), n)
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):  # a method: only in a derived check
        receiver = _eval(n.func.value, env)
        allowed = next((m for t, m in METHODS.items() if type(receiver) is t), frozenset())
        if n.func.attr not in allowed:
            raise ExprError(f"{type(receiver).__name__}.{n.func.attr} is not known to kb")
        args = [_eval(a, env) for a in n.args]
        _spent(_size(receiver))
        result = getattr(receiver, n.func.attr)(*args)
        return _computed(list(result) if n.func.attr in ("keys", "values", "items") else result, n)
    raise ExprError(f"{type(n).__name__} is not allowed")


_PER_ITEM = 20  # units of MAX_WORK one item of a comprehension costs: at most 250,000 items made


def _comprehension(elt: ast.expr, generators: list[ast.comprehension], env: Mapping[str, Any]) -> Iterator[Any]:
    """The items of `elt for ... in ... if ...`, each loop's names bound over the env."""
    if not generators:
        yield _eval(elt, env)
        return
    gen, rest = generators[0], generators[1:]
    iterable = _eval(gen.iter, env)
    if not isinstance(iterable, (list, tuple, set, frozenset, str, dict)):
        raise ExprError(f"cannot loop over {type(iterable).__name__} in {_short(ast.unparse(gen.iter))!r}")
    for item in sorted(iterable, key=repr) if isinstance(iterable, (set, frozenset)) else iterable:
        _spent(_PER_ITEM)
        inner = ChainMap(_bind(gen.target, item), dict(env)) if not isinstance(env, ChainMap) else env.new_child(
            _bind(gen.target, item))
        if all(_eval(cond, inner) for cond in gen.ifs):
            yield from _comprehension(elt, rest, inner)


def _bind(target: ast.expr, value: Any) -> dict[str, Any]:
    if isinstance(target, ast.Name):
        return {target.id: value}
    assert isinstance(target, ast.Tuple)
    items = list(value) if isinstance(value, (list, tuple)) else None
    if items is None or len(items) != len(target.elts):
        raise ExprError(f"cannot unpack {type(value).__name__} into {len(target.elts)} names")
    out: dict[str, Any] = {}
    for t, v in zip(target.elts, items):
        out.update(_bind(t, v))
    return out


def _plain_types(t: Any) -> bool:
    return (isinstance(t, type) and t in TYPES.values()) or (
        isinstance(t, tuple) and all(isinstance(x, type) and x in TYPES.values() for x in t))


def _size(value: Any) -> int:
    """A bound of the room a value takes: characters of a string, items of a sequence (nested
    ones summed), a third of an int's bits (at least its decimal digits); at least 1. Counted
    without recursion, and only up to just beyond MAX_SIZE."""
    total = 0
    stack = [value]
    while stack and total <= MAX_SIZE:
        v = stack.pop()
        if isinstance(v, str):
            total += len(v) + 1
        elif isinstance(v, int) and not isinstance(v, bool):
            total += v.bit_length() // 3 + 1
        elif isinstance(v, (list, tuple, set, frozenset)):
            total += 1
            stack.extend(v)
        else:
            total += 1
    return total


def _spent(size: int) -> int:
    """Counts `size` against the evaluation's MAX_WORK; returns it."""
    left = getattr(_work, "left", MAX_WORK) - size
    _work.left = left
    if left < 0:
        raise ExprError(f"expression too costly to evaluate (more than {MAX_WORK} units of values computed)")
    return size


def _computed(value: Any, n: ast.expr) -> Any:
    """A value just computed: within the bounds, and counted."""
    _spent(_bounded(value, n))
    return value


def _check_size(size: int, n: Optional[ast.expr]) -> None:
    if size > MAX_SIZE:
        where = f" in {_short(ast.unparse(n))!r}" if n is not None else ""
        raise ExprError(f"value too large{where} (more than {MAX_SIZE} characters or items)")


def _bounded(value: Any, n: Optional[ast.expr] = None) -> int:
    """The value's size, when the value stays within the bounds of an intermediate value."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
        where = f" in {_short(ast.unparse(n))!r}" if n is not None else ""
        raise ExprError(f"number too large{where} (more than {MAX_INT_BITS} bits)")
    size = _size(value)
    _check_size(size, n)
    return size


_SEQUENCES = (str, list, tuple)


def _check_operands(n: ast.BinOp, left: Any, right: Any) -> None:
    """Refuse, before computing it, a result that would exceed the bounds (a power, a repeated
    sequence), and string formatting with `%` (`'%.4000f' % 1e308`), whatever the value's source."""
    if isinstance(n.op, ast.Pow) and _is_int(left) and _is_int(right) and right > 0 and abs(left) > 1:
        if (abs(left).bit_length() - 1) * right > MAX_INT_BITS:
            raise ExprError(f"exponent too large in {_short(ast.unparse(n))!r} (the result would have more than "
                            f"{MAX_INT_BITS} bits)")
    elif isinstance(n.op, ast.Mult):
        for seq, times in ((left, right), (right, left)):
            if isinstance(seq, _SEQUENCES) and _is_int(times) and times > 0:
                _check_size(_spent(_size(seq)) * times, n)
    elif isinstance(n.op, ast.Mod) and isinstance(left, str):
        raise ExprError(_NO_FORMATTING.format(_short(ast.unparse(n))))


def _is_int(value: Any) -> bool:
    return isinstance(value, int)  # bools too: True * "x" repeats


def names_of(expr: str | ast.expr) -> list[str]:
    node = parse(expr) if isinstance(expr, str) else expr
    out: list[str] = []
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id not in FUNCTIONS and n.id not in ("True", "False", "None") and n.id not in out:
            out.append(n.id)
    return out


# --- the site's checker: the same expression as a JSON tree ---------------------------------------
def to_tree(expr: str | ast.expr) -> Any:
    """A JSON tree of a whitelisted expression, interpreted by static/check.js."""
    n = parse(expr) if isinstance(expr, str) else expr
    if isinstance(n, ast.Constant):
        if isinstance(n.value, float) and not math.isfinite(n.value):
            raise ExprError("non-finite constant")
        return ["const", n.value]
    if isinstance(n, ast.Name):
        if n.id in ("True", "False", "None"):
            return ["const", {"True": True, "False": False, "None": None}[n.id]]
        return ["name", n.id]
    if isinstance(n, ast.BoolOp):
        return ["and" if isinstance(n.op, ast.And) else "or", [to_tree(v) for v in n.values]]
    if isinstance(n, ast.UnaryOp):
        return [{ast.Not: "not", ast.USub: "neg", ast.UAdd: "pos"}[type(n.op)], to_tree(n.operand)]
    if isinstance(n, ast.BinOp):
        return ["bin", _OP_SYMBOL[type(n.op)], to_tree(n.left), to_tree(n.right)]
    if isinstance(n, ast.Compare):
        return ["cmp", to_tree(n.left), [[_CMP_SYMBOL[type(o)], to_tree(c)] for o, c in zip(n.ops, n.comparators)]]
    if isinstance(n, ast.IfExp):
        return ["if", to_tree(n.test), to_tree(n.body), to_tree(n.orelse)]
    if isinstance(n, (ast.List, ast.Tuple, ast.Set)):
        return ["list", [to_tree(e) for e in n.elts]]
    if isinstance(n, ast.Subscript):
        return ["item", to_tree(n.value), to_tree(n.slice)]
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
        return ["call", n.func.id, [to_tree(a) for a in n.args]]
    raise ExprError(f"{type(n).__name__} is not allowed")


def readable(expr: str) -> str:
    """The condition as people read it (normalised source)."""
    from kb.scan.unparse import unparse

    return unparse(parse(expr))


def substitute(guard: ast.expr, bindings: Mapping[str, ast.expr], locals_: Mapping[str, ast.expr],
               depth: int = 0) -> ast.expr:
    """The scanned guard with every sub-expression named in `bindings` (by its source text)
    replaced by the binding, and other names replaced by their local definitions."""
    from kb.scan.unparse import unparse

    class _Swap(ast.NodeTransformer):
        def visit(self, node: ast.AST) -> Any:
            if isinstance(node, ast.expr):
                key = unparse(node)
                if key in bindings:
                    return bindings[key]
                if isinstance(node, ast.Name) and node.id in locals_ and depth < 6:
                    return substitute(locals_[node.id], bindings, locals_, depth + 1)
            return super().visit(node)

    swapped = _Swap().visit(copy.deepcopy(guard))
    assert isinstance(swapped, ast.expr)
    return swapped

