"""The keys of a JSON-valued flag as pydantic validates them while vLLM's parser reads the flag
(`--profiler-config '{"profiler": true}'` is a ProfilerConfig as soon as it is read): each key's
type in JSON mode (lax: `"yes"` is a boolean, `false` is the number 0, `"12"` an integer), a
literal's options, pydantic's field constraints; the errors in the class's field order, in
pydantic's words. A type kb does not model (an enum, a nested config, the items of a list) gives
no verdict for its key: never a guessed error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from kb.checks.order import _CHECKS, pydantic_report
from kb.configmodel import ConfigModel, JsonField

_BOOL_WORDS = frozenset({"0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes"})
_TAGS = {"bool": "bool", "int": "int", "float": "float", "str": "str"}


@dataclass(frozen=True)
class KeyError_:
    """One error of pydantic's report: where (`field`, or `field.tag` for a member of a union),
    what, its type, and the value."""

    loc: str
    msg: str
    kind: str
    value: Any


class _Unknown(Exception):
    """A member kb does not model: no verdict for the key."""


def _member(kind: str, options: Sequence[Any], value: Any) -> Optional[tuple[str, str, Any]]:
    """None when the member accepts the value, else (message, error type, the value it checked)."""
    if kind == "none":
        return None if value is None else ("Input should be None", "none_required", value)
    if kind == "bool":
        if isinstance(value, bool):
            return None
        if isinstance(value, str):
            return None if value.strip().lower() in _BOOL_WORDS else (
                "Input should be a valid boolean, unable to interpret input", "bool_parsing", value)
        if isinstance(value, (int, float)):
            return None if value in (0, 1) else (
                "Input should be a valid boolean, unable to interpret input", "bool_parsing", value)
        return "Input should be a valid boolean", "bool_type", value
    if kind == "str":
        return None if isinstance(value, str) else ("Input should be a valid string", "string_type", value)
    if kind == "int":
        if isinstance(value, (bool, int)):
            return None
        if isinstance(value, float):
            return None if math.isfinite(value) and value.is_integer() else (
                "Input should be a valid integer, got a number with a fractional part", "int_from_float", value)
        if isinstance(value, str):
            if re.fullmatch(r"\s*[-+]?\d+(\.0*)?\s*", value):  # pydantic reads "1.0" as 1
                return None
            if re.fullmatch(r"\s*[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?\s*", value):
                raise _Unknown  # a number with a fraction or an exponent: pydantic's words not modelled
            return "Input should be a valid integer, unable to parse string as an integer", "int_parsing", value
        return "Input should be a valid integer", "int_type", value
    if kind == "float":
        if isinstance(value, (bool, int, float)):
            return None
        if isinstance(value, str):
            try:
                float(value.strip())
                return None
            except ValueError:
                return "Input should be a valid number, unable to parse string as a number", "float_parsing", value
        return "Input should be a valid number", "float_type", value
    if kind == "literal":
        if isinstance(value, (bool, float)) and any(isinstance(o, int) and not isinstance(o, bool) for o in options):
            raise _Unknown  # True == 1, 1.0 == 1: pydantic's lax rules for numbers are not modelled
        if any(value == o and type(value) is type(o) for o in options):
            return None
        shown = [repr(o) for o in options]
        expected = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]
        return f"Input should be {expected}", "literal_error", value
    if kind in ("list", "tuple", "set"):
        if isinstance(value, list):
            raise _Unknown  # its items: not modelled
        return "Input should be a valid array", f"{kind}_type", value
    raise _Unknown


def _tag(kind: str, options: Sequence[Any]) -> str:
    if kind == "literal":
        return "literal[" + ",".join(repr(o) for o in options) + "]"
    if kind in _TAGS:
        return _TAGS[kind]
    raise _Unknown


def _constraints(field: JsonField, value: Any) -> Optional[tuple[str, str]]:
    if isinstance(value, str) or value is None or not isinstance(value, (int, float)):
        return None
    number = float(value) if isinstance(value, bool) else value
    limits = dict(field.constraints)
    for key, kind, msg, ok in _CHECKS:
        limit = limits.get(key)
        if isinstance(limit, (int, float)) and not isinstance(limit, bool) and not ok(number, limit):
            shown = str(int(limit)) if isinstance(limit, float) and limit.is_integer() else str(limit)
            return msg.format(shown), kind
    return None


def key_errors(field: JsonField, value: Any) -> list[KeyError_]:
    """pydantic's errors for one key ([] when it passes); _Unknown when kb cannot tell."""
    if field.before:
        raise _Unknown  # a before or wrap validator changes the value first
    members = [(k, o) for k, o in field.members if k != "none"]
    if value is None and len(members) < len(field.members):
        return []
    if not members:
        raise _Unknown
    failures = [_member(k, o, value) for k, o in members]
    if any(f is None for f in failures):
        number = _constraints(field, value) if any(k in ("int", "float") for k, _ in members) else None
        return [KeyError_(field.name, number[0], number[1], value)] if number else []
    if len(members) == 1:
        msg, kind, got = failures[0]  # type: ignore[misc]
        return [KeyError_(field.name, msg, kind, got)]
    return [KeyError_(f"{field.name}.{_tag(k, o)}", f[0], f[1], f[2])  # type: ignore[index]
            for (k, o), f in zip(members, failures)]


@dataclass(frozen=True)
class JsonRefusal:
    """pydantic's report for a JSON-valued flag that vLLM's parser refuses."""

    config_class: str
    errors: tuple[KeyError_, ...]
    exact: bool = True  # False: a key kb cannot tell may add an error of its own

    def printed(self, argument: str) -> str:
        return f"argument {argument}: " + pydantic_report(self.config_class,
                                                          [(e.loc, e.msg, e.kind, e.value) for e in self.errors])


def refusal(model: ConfigModel, config_class: str, value: Mapping[str, Any]) -> Optional[JsonRefusal]:
    """pydantic's errors for the keys of a JSON object given to a flag that parses into
    `config_class`, in the class's field order; None when every key kb can tell passes."""
    errors: list[KeyError_] = []
    exact = True
    for field in (f for f in model.json_fields if f.config_class == config_class):
        if field.name not in value:
            continue
        try:
            errors += key_errors(field, value[field.name])
        except _Unknown:
            exact = False
    return JsonRefusal(config_class, tuple(errors), exact) if errors else None


MISSING = object()  # a value kb cannot tell pydantic would hold


def converter(field: JsonField) -> Callable[[Any], Any]:
    """The JSON value of the key as pydantic holds it after validation (`"false"` for a bool is
    False, `"12"` for an int is 12), or MISSING when kb cannot tell (a before validator, an enum, a
    value pydantic refuses, a union it would resolve by rules kb does not model)."""
    def convert(value: Any) -> Any:
        if field.before:
            return MISSING
        if value is None:
            return None if any(k == "none" for k, _ in field.members) else MISSING
        kinds = [k for k, _ in field.members if k != "none"]
        if len(kinds) != 1:
            plain = {"str": str, "bool": bool, "int": int, "float": float}
            exact = [k for k in kinds if k in plain and type(value) is plain[k]]
            return value if exact else MISSING
        kind = kinds[0]
        try:
            if _member(kind, dict(field.members).get(kind, ()), value) is not None:
                return MISSING
        except _Unknown:
            return MISSING
        if kind == "bool" and isinstance(value, str):
            return value.strip().lower() in ("1", "on", "t", "true", "y", "yes")
        if kind == "bool":
            return bool(value)
        if kind == "int" and isinstance(value, (str, float)):
            return int(float(value.strip()) if isinstance(value, str) else value)
        if kind == "float" and isinstance(value, str):
            return float(value.strip())
        if kind in ("list", "tuple", "set", "dict", "dataclass", "other"):
            return value if kind in ("list", "dict") else MISSING
        return value
    return convert
