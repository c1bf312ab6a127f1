"""The values worth trying for each input of a derived check (kb/checks/derive.py) when kb looks for
a launch that raises its error and one that does not: the input's default first, then the values
vLLM's own condition compares it with (and their neighbours), its choices, the kinds its type
allows, a few small counts. Small and ordered, so that the search is quick and deterministic."""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from kb.checks.candidates import flag_candidates
from kb.checks.compiled import Derived, DerivedIndex, Ref
from kb.checks.facts import constants_of
from kb.config.order import REQUEST_CLASS
from kb.configmodel import ConfigModel, Flag, JsonField

NOT_GIVEN = object()  # the input left out of the launch
MAX_VALUES = 12
SMALL_COUNTS = (1, 2, 4, 8, 0, 3, 16)
EXAMPLE_TEXT = "example"  # a string whose words do not matter to the condition


@dataclass(frozen=True)
class Domain:
    ref: Ref
    values: tuple[Any, ...]  # NOT_GIVEN (when the input may be left out) or a value, in the order tried
    default: Any  # what the launch holds when it leaves the input out (NOT_GIVEN: unknown to kb)


def _plain(value: Any) -> bool:
    return type(value) in (str, int, float, bool) or value is None  # not an enum member: a plain value


def near_constants(check: Derived) -> dict[str, list[Any]]:
    """Ref name -> the constants vLLM's condition compares it with (values of its own constant
    collections among them), in the order they appear."""
    node = ast.parse(check.expr, mode="eval").body
    values = constants_of(check)
    out: dict[str, list[Any]] = {}
    for n in ast.walk(node):
        if not isinstance(n, ast.Compare):
            continue
        names = [x.id for x in ast.walk(n) if isinstance(x, ast.Name) and x.id not in values]
        found: list[Any] = []
        signed = {id(x.operand) for x in ast.walk(n) if isinstance(x, ast.UnaryOp) and isinstance(x.op, ast.USub)}
        for x in ast.walk(n):
            if isinstance(x, ast.Constant) and _plain(x.value):
                value = x.value
                if id(x) in signed and isinstance(value, (int, float)) and not isinstance(value, bool):
                    value = -value  # `-1` is `-(1)` in the syntax tree
                found.append(value)
            elif isinstance(x, ast.Name) and x.id in values:
                v = values[x.id]
                found += [i for i in v if _plain(i)] if isinstance(v, (tuple, list, frozenset, set)) else \
                    [v] if _plain(v) else []
        for name in names:
            bucket = out.setdefault(name, [])
            bucket += [v for v in found if not any(type(v) is type(b) and v == b for b in bucket)]  # 1 is not True
    return out


def _pool_key(r: Ref) -> tuple[str, str]:
    kind = {"flag-given": "flag", "flag-key-given": "flag-key", "computed": "flag"}.get(r.kind, r.kind)
    return kind, r.key


Pool = dict[tuple[str, str], list[Any]]


def constant_pool(index: DerivedIndex) -> Pool:
    """(kind, key) -> the constants every derived check compares the input with: the values vLLM
    treats specially (`--spec-method ngram` in one check is a good value to try in another)."""
    pool: Pool = {}
    for check in index.checks:
        near = near_constants(check)
        for r in check.refs:
            bucket = pool.setdefault(_pool_key(r), [])
            bucket += [v for v in near.get(r.name, []) if v not in bucket]
    return pool


def _numbers(near: Sequence[Any], integer: bool, low: float = -math.inf, high: float = math.inf) -> list[Any]:
    found: list[Any] = []
    for v in near:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not math.isfinite(v)):
            continue  # a guard's `-1e308 * 10` or `float("inf")`: no launch gives it
        for x in (v, v + 1, v - 1) if integer and isinstance(v, int) else (v, v * 2 if v else 1.0, v / 2):
            if isinstance(x, int) or math.isfinite(x):
                found.append(int(x) if integer else float(x))
    found += list(SMALL_COUNTS) if integer else [0.5, 1.0, 0.0]
    return [x for x in dict.fromkeys(found) if low <= x <= high]


def _kind_values(kind: str, options: Sequence[Any], near: Sequence[Any]) -> list[Any]:
    if kind == "bool":
        return [True, False]
    if kind == "int":
        return _numbers(near, True)
    if kind == "float":
        return _numbers(near, False)
    if kind == "str":
        return _strings(near)
    if kind == "literal":
        return [o for o in options if _plain(o)]
    if kind in ("list", "tuple", "set"):
        items = [v for v in near if _plain(v) and v is not None][:4]
        return [[], *([v] for v in items), *([items[:2]] if len(items) > 1 else []), [0], [-1], [EXAMPLE_TEXT],
                [(items or [EXAMPLE_TEXT])[0]] * 2]
    if kind == "dict":
        return [{}]
    return []


def _strings(near: Sequence[Any]) -> list[Any]:
    """The strings the condition compares with (a few), one that is none of them, the empty one, the rest."""
    found = [v for v in near if isinstance(v, str)]
    return [*found[:4], EXAMPLE_TEXT, "", *found[4:]]


def flag_values(flag: Flag, near: Sequence[Any], given: Mapping[str, Any]) -> list[Any]:
    """A flag's values to try (its default first when known)."""
    out: list[Any] = []
    kind = flag.value_type or flag.type
    if flag.nargs in ("+", "*") and flag.action == "store":
        ints = kind in ("int", "human_readable_int")
        items = _numbers(near, True) if ints else _strings(near)
        out = [[v] for v in items] + ([[items[0]] * 2] if items else [])
    elif flag.action in ("store_true", "store_false", "boolean") or flag.type == "bool":
        out = [True, False]
    elif flag.choices:
        out = [v for v in near if v in flag.choices] + list(flag.choices)
    elif (flag.value_type or flag.type) in ("int", "human_readable_int", "human_readable_int_or_auto"):
        limits = dict(flag.constraints)
        low = limits.get("ge", limits.get("gt", -math.inf))
        high = limits.get("le", limits.get("lt", math.inf))
        found = _numbers(near, True, low if isinstance(low, (int, float)) else -math.inf,
                         high if isinstance(high, (int, float)) else math.inf)
        out = found + [v for v in flag_candidates(flag, given) if v not in found][:4]
    elif (flag.value_type or flag.type) == "float":
        out = _numbers(near, False)
    elif flag.parses_into or (flag.value_type or flag.type) in ("loads", "parse_dataclass", "union_dict_and_str") \
            or isinstance(flag.default, dict):
        out = [{}]
    else:
        out = _strings(near)
    if flag.default_known and flag.default_exact:
        out = [flag.default] + [v for v in out if v != flag.default or type(v) is not type(flag.default)]
    return _dedupe(out)[:MAX_VALUES]


def _dedupe(values: Sequence[Any]) -> list[Any]:
    seen: list[Any] = []
    for v in values:
        if not any(type(v) is type(s) and v == s for s in seen):
            seen.append(v)
    return seen


def request_kinds(annotation: str) -> list[str]:
    """The kinds of values a request field's annotation allows (`int | None` -> int), plain ones
    first; none for a class of vLLM's (a structured-outputs object) kb does not build."""
    outer = re.sub(r"\[[^\[\]]*\]", "[]", annotation)  # list[int]: a list, whose items say nothing of the field
    return [k for k in ("float", "int", "bool", "list", "dict", "str") if re.search(rf"\b{k}\b", outer)]


def request_values(annotation: str, near: Sequence[Any]) -> list[Any]:
    """A request field's values to try: either side of the bounds vLLM's condition compares it with
    (a negative bound is `-(1)` in the source: its sign is tried too), the kinds its annotation
    allows (lists of its item type), and for a float the infinities vLLM's finiteness checks catch."""
    kinds = request_kinds(annotation)
    scalar = [k for k in kinds if k in ("int", "float")]
    numbers = [v for v in near if isinstance(v, (int, float)) and not isinstance(v, bool)]
    values: list[Any] = []
    for kind in scalar:
        cast = int if kind == "int" else float
        values += [cast(x) for v in numbers for x in (v, 0, v + 1, v - 1, -v, -v - 1)] + [cast(0)]
    if "float" in kinds:
        values += [math.inf]
    for kind in kinds:
        values += _kind_values(kind, (), near)
    item = re.search(r"\blist\[(\w+)\]", annotation)
    if item is not None and item.group(1) in ("int", "str"):  # a list holds its own kind of items
        want: type = int if item.group(1) == "int" else str
        values = [v for v in values if not isinstance(v, list) or all(type(x) is want for x in v)]
        values += [[-1], [0]] if want is int else [[""], [EXAMPLE_TEXT]]
    if "bool" not in kinds:
        values = [v for v in values if not isinstance(v, bool)]
    return _dedupe(values)[:MAX_VALUES]


def domains(check: Derived, model: ConfigModel, key_defaults: Mapping[str, Any],
            pool: Optional[Pool] = None) -> dict[str, Domain]:
    """Ref name -> what to try for it, for the refs a launch sets (flags, keys of JSON-valued
    flags, config.json keys); the others are fixed (vLLM's constants, the platform kb assumes,
    the environment's defaults) or unknown to kb."""
    by_dest = {f.dest: f for f in model.flags}
    fields: dict[tuple[str, str], JsonField] = {(j.config_class, j.name): j for j in model.json_fields}
    near = near_constants(check)
    requests = {f.name: f for f in model.request_fields if f.model == REQUEST_CLASS}
    out: dict[str, Domain] = {}
    for r in check.refs:
        close = near.get(r.name, [])
        close = close + [v for v in (pool or {}).get(_pool_key(r), []) if v not in close]
        if r.kind in ("flag", "flag-given"):
            flag = by_dest.get(r.key)
            if flag is None or not flag.options:
                continue
            values = flag_values(flag, close, {})
            default = flag.default if flag.default_known and flag.default_exact and r.kind == "flag" else NOT_GIVEN
            out[r.name] = Domain(r, tuple(values), default)
        elif r.kind in ("flag-key", "flag-key-given"):
            dest, _, key = r.key.partition(".")
            flag = by_dest.get(dest)
            if flag is None or not flag.options:
                continue
            field = fields.get((flag.parses_into or "", key)) or next(
                (j for (c, n), j in fields.items() if n == key and c.replace("_", "").lower() == dest.replace("_", "").lower()),
                None)
            values = []
            for kind, options in field.members if field is not None else (("str", ()), ("int", ()), ("bool", ())):
                values += _kind_values(kind, options, close)
            values = [v for v in close if _plain(v) and v is not None] + values
            default = key_defaults.get(r.key, NOT_GIVEN) if r.kind == "flag-key" else NOT_GIVEN
            out[r.name] = Domain(r, (NOT_GIVEN, *_dedupe(values)[:MAX_VALUES]), default)
        elif r.kind == "given":
            out[r.name] = Domain(r, (False, True), False)
        elif r.kind == "computed" and r.key in by_dest and by_dest[r.key].options:
            # what vLLM computes, unless the flag of the same name gives it
            flag = by_dest[r.key]
            companion = Ref(r.name + ":flag", "flag", r.key, flag.name)
            out[companion.name] = Domain(companion, (NOT_GIVEN, *flag_values(flag, close, {})), NOT_GIVEN)
        elif r.kind == "request" and r.key in requests:
            f = requests[r.key]
            default = f.default if f.default_known and f.default_exact and not f.required else NOT_GIVEN
            out[r.name] = Domain(r, (NOT_GIVEN, *request_values(f.type, close)), default)
        elif r.kind == "config-json":
            ints = [v for v in close if isinstance(v, int) and not isinstance(v, bool)]
            values = [v for v in close if v is not None] + (_numbers(ints, True) if ints or not close else [])
            values += [] if any(v is not None for v in close) else [{}, EXAMPLE_TEXT]
            out[r.name] = Domain(r, tuple(_dedupe(values)[:MAX_VALUES]), NOT_GIVEN)
    return out
