"""A pasted message's own values put to vLLM's condition for its error (`kb explain`).

A derived check (kb/checks/derive.py) knows which input each placeholder of its message prints.
Where the message prints a flag the condition reads, kb can say, for the user's own values, which
values of that flag the condition lets through: the condition is evaluated as `kb check`
evaluates it (kb/checks/evaluate.py `holds`) over the values the paste shows and vLLM's own
constants, nothing else assumed, for each value `kb check` tries for the flag
(kb/checks/candidates.py `flag_candidates`). Nothing is said unless the condition holds for the pasted
values themselves (the paste is this error, read right), and a value whose verdict needs an input
the paste does not show is left out."""

from __future__ import annotations

import argparse
import ast
import copy
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Optional

from kb.checks.candidates import flag_candidates
from kb.checks.cli_parse import converter
from kb.checks.evaluate import check_shape, holds, work_budget
from kb.configmodel import Flag
from kb.derivedmodel import MessageCheck
from kb.errors import ExprError

if TYPE_CHECKING:  # the compiler (kb/checks/derive.py, heavy to import) is not imported to evaluate
    from kb.checks.compiled import Derived
    from kb.configmodel import ConfigModel

USER_SET = ("flag", "flag-given")  # what a launch sets: the values kb tries
NAMED = ("config-json", "env")  # inputs users name as kb shows them (`config.json num_attention_heads`)
_INT = re.compile(r"[+-]?\d{1,30}")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")
_UNREAD = object()  # a printed value kb does not read back


def message_checks(checks: Sequence[Derived], model: ConfigModel) -> tuple[MessageCheck, ...]:
    """The checks whose message prints a flag their condition reads, with those flags."""
    by_dest = {f.dest: f for f in model.flags}
    out = []
    for c in checks:
        refs = {r.name: r for r in c.refs}
        shown = [refs[expr] for _, expr in c.message if expr in refs]
        dests = dict.fromkeys(r.key for r in shown if r.kind in USER_SET and r.key in by_dest)
        if dests:
            out.append(MessageCheck(c.to_json(), [_flag_json(by_dest[d]) for d in dests]))
    return tuple(out)


def _flag_json(flag: Flag) -> dict[str, Any]:
    return flag.to_json() | {"help": "", "group": ""}  # what the values to try depend on, not its words


@dataclass(frozen=True)
class FlagValues:
    flag: str  # as users name it: --tensor-parallel-size
    yours: Any
    passing: tuple[Any, ...]  # of the values kb tries, those for which the condition does not hold
    choices: bool  # the values tried are the flag's choices


@dataclass(frozen=True)
class OwnValues:
    """What the paste's values say: the values it shows the condition reads (as users name them),
    and for each flag it prints, the values with which vLLM's condition does not hold."""

    given: tuple[tuple[str, Any], ...]
    flags: tuple[FlagValues, ...]


def own_values(checks: object, values: Sequence[tuple[str, str]]) -> Optional[OwnValues]:
    """`checks`: an index entry's `checks` (MessageCheck JSON; anything else is ignored);
    `values`: the placeholder values the matcher read from the paste."""
    if not isinstance(checks, list):
        return None
    pasted = dict(values)
    with work_budget():  # every evaluation of one answer, bounded
        for item in checks:
            try:
                mc = MessageCheck.from_json(item)
                check = _Check.of(mc.check)
                flags = {f.dest: f for f in (Flag.from_json(d) for d in mc.flags)}
                found = _evaluate(check, flags, pasted)
            except (KeyError, TypeError, ValueError, IndexError, AttributeError):
                continue  # an index of another shape (a hand-made --index): nothing to say
            if found is not None:
                return found
    return None


class _Ref(NamedTuple):
    """kb.checks.compiled.Ref, as its JSON gives it."""

    name: str
    kind: str
    key: str
    shown: str


class _Check(NamedTuple):
    """What `kb explain` reads of a kb.checks.compiled.Derived's JSON."""

    expr: str
    refs: tuple[_Ref, ...]
    message: tuple[tuple[str, str], ...]

    @staticmethod
    def of(d: list[Any]) -> _Check:
        """TypeError (or IndexError, ValueError) on another shape."""
        refs = tuple(_Ref(*r) for r in d[4])
        message = tuple((m[0], m[1]) for m in d[5])
        if not isinstance(d[3], str) or not all(isinstance(x, str) for r in refs for x in r) or \
                not all(isinstance(x, str) for m in message for x in m):
            raise TypeError("a check of another shape")
        return _Check(d[3], refs, message)


def _constant(key: str) -> Any:
    from kb.checks.facts import constant_value  # only for a check that reads one of vLLM's constants

    return constant_value(key)


def _evaluate(check: _Check, flags: Mapping[str, Flag], pasted: Mapping[str, str]) -> Optional[OwnValues]:
    refs = {r.name: r for r in check.refs}
    env: dict[str, Any] = {}
    shown: list[_Ref] = []
    printed: list[tuple[ast.expr, str, frozenset[str]]] = []  # an expression over refs the message prints
    said: list[tuple[str, Any]] = []  # its placeholder (as vLLM names it) and value
    for placeholder, expr in check.message:
        if placeholder not in pasted:
            continue
        ref = refs.get(expr)
        if ref is None:  # `{num_q_per_kv}` prints `heads // kv_heads`: that expression's value
            node = _tree(expr)
            names = frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name)) if node is not None else None
            value = read_value(pasted[placeholder], None)
            if node is not None and names and names <= refs.keys() and value is not _UNREAD:
                name = f"_printed{len(printed)}"
                printed.append((node, name, names))
                env[name] = value
                said.append((placeholder.removeprefix("self."), value))
            continue
        if ref.kind == "value":
            continue
        value = read_value(pasted[placeholder], flags.get(ref.key) if ref.kind in USER_SET else None)
        if value is _UNREAD or (ref.name in env and not same(env[ref.name], value)):
            return None  # one input printed twice with two values: not read right
        if ref.name not in env:
            env[ref.name] = value
            shown.append(ref)
            if ref.kind not in USER_SET:
                said.append((ref.shown if ref.kind in NAMED else placeholder.removeprefix("self."), value))
    for r in check.refs:
        if r.kind == "value":
            try:
                env[r.name] = _constant(r.key)
            except (ValueError, TypeError, KeyError, IndexError):
                continue
    tree = _tree(check.expr)
    if tree is None:
        return None
    parts = _conjuncts(tree)
    # vLLM raised it: every part of its condition held. One the values decide otherwise: misread.
    if any(_verdict(ast.unparse(_printed_as(c, printed, "")), env) is False for c in parts):
        return None
    pasted_names = [r.name for r in shown] + [name for _, name, _ in printed]
    counts = {n: env[n] for n in pasted_names if isinstance(env[n], int) and not isinstance(env[n], bool)}
    out = []
    for r in shown:
        flag = flags.get(r.key)
        if r.kind not in USER_SET or flag is None:
            continue
        # the parts that read the flag decide; the others held for the paste and do not read it
        mine = [ast.unparse(t) for t in (_printed_as(c, printed, r.name) for c in parts) if _reads(t, r.name)]
        if not mine or any(_verdict(t, env) is not True for t in mine):
            continue
        passing = tuple(v for v in flag_candidates(flag, counts) if not same(v, env[r.name])
                        and any(_verdict(t, {**env, r.name: v}) is False for t in mine))
        if passing:
            out.append(FlagValues(r.shown, env[r.name], passing, bool(flag.choices)))
    if not out:
        return None
    return OwnValues(tuple(said), tuple(out))


def _tree(text: str) -> Optional[ast.expr]:
    """An expression of the index (a hand-made one too), parsed within the evaluator's bounds."""
    try:
        node = ast.parse(text, mode="eval").body
        check_shape(node)
    except (SyntaxError, ValueError, RecursionError, MemoryError, ExprError):
        return None
    return node


def _conjuncts(node: ast.expr) -> list[ast.expr]:
    """The parts of `a and (b and c)`: a, b, c."""
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        return [part for v in node.values for part in _conjuncts(v)]
    return [node]


def _printed_as(node: ast.expr, printed: Sequence[tuple[ast.expr, str, frozenset[str]]], varied: str) -> ast.expr:
    """`node` with each expression the message prints replaced by the name of its printed value,
    except those that read `varied` (their value changes with it)."""
    shapes = {ast.dump(n): name for n, name, names in printed if varied not in names}

    class _Swap(ast.NodeTransformer):
        def visit(self, n: ast.AST) -> ast.AST:
            name = shapes.get(ast.dump(n)) if isinstance(n, ast.expr) else None
            return ast.Name(name, ast.Load()) if name is not None else super().visit(n)

    if not shapes:
        return node
    swapped = _Swap().visit(copy.deepcopy(node))
    assert isinstance(swapped, ast.expr)
    return swapped


def _reads(node: ast.expr, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def _verdict(expr: str, env: Mapping[str, Any]) -> Optional[bool]:
    """Whether the condition holds; None when the values do not decide it (an input not shown)."""
    try:
        return holds(expr, env)
    except ExprError:
        return None


def same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def read_value(text: str, flag: Optional[Flag]) -> Any:
    """A value as vLLM printed it (`str(value)`), read back: through the flag's own converter
    (kb/checks/cli_parse.py) for a flag, else as the literal it prints as (None, True, False, a
    number), else the text."""
    text = text.strip()
    if text == "None":
        return None
    if flag is not None:
        if flag.action in ("store_true", "store_false", "boolean") or flag.type == "bool":
            return {"True": True, "False": False}.get(text, _UNREAD)
        if flag.nargs not in (None, "?") or flag.action != "store":
            return _UNREAD  # a list or a count: not read back from its printed form
        convert = converter(flag)
        try:
            value = convert(text) if convert is not None else text
        except (ValueError, TypeError, ArithmeticError, argparse.ArgumentTypeError):
            return _UNREAD
        if flag.choices and not any(same(value, c) for c in flag.choices):
            return _UNREAD
        return value
    if text in ("True", "False"):
        return text == "True"
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text) and math.isfinite(float(text)):
        return float(text)
    return text
