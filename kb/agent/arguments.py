"""The arguments of `kb mcp`'s tools, read from each tool function's signature: the JSON Schema
`tools/list` publishes, and the check every call passes before any work (the types the signature
names, the required ones, no unknown ones, the size limits below). A bad argument is a located
UsageError (`check_launch: command: expected a string, got 5`), which the server answers as a
tool error."""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kb.errors import UsageError

MAX_TEXT = 1_000_000  # characters of one string argument (a paste, a command, a query)
MAX_OBJECT_CHARS = 2 * 1024 * 1024  # characters of an object argument (config_json, hardware) written as JSON
MAX_OBJECT_NESTING = 32  # levels of an object argument; a real config.json has a handful

_JSON_TYPES = {str: "string", int: "integer", float: "number", dict: "object", list: "array"}
_NAMES = {str: "a string", int: "an integer", float: "a number", dict: "a JSON object", list: "a JSON array"}
_SURROGATE = re.compile("[\ud800-\udfff]")  # json.loads joins the pairs: what is left is a lone one


@dataclass(frozen=True)
class Param:
    name: str
    kind: type  # str, int, float, dict or list
    required: bool


def params_of(fn: Callable[..., Any]) -> tuple[Param, ...]:
    """The parameters of a tool function: each one's JSON type, and whether it has a default."""
    hints = typing.get_type_hints(fn)
    found = []
    for name, p in inspect.signature(fn).parameters.items():
        hint = hints[name]
        if typing.get_origin(hint) in (typing.Union, types.UnionType):  # Optional[X]
            hint = next(a for a in typing.get_args(hint) if a is not type(None))
        kind = typing.get_origin(hint) or hint
        if kind not in _JSON_TYPES:
            raise TypeError(f"{fn.__name__}: {name}: no JSON type for {hint!r}")
        found.append(Param(name, kind, p.default is inspect.Parameter.empty))
    return tuple(found)


def input_schema(fn: Callable[..., Any]) -> dict[str, Any]:
    """The tool's `inputSchema` (JSON Schema), with the size limits the call checks."""
    properties: dict[str, Any] = {}
    for p in params_of(fn):
        schema: dict[str, Any] = {"type": _JSON_TYPES[p.kind]}
        if p.kind is str:
            schema["maxLength"] = MAX_TEXT
        properties[p.name] = schema
    return {"type": "object", "properties": properties, "required": [p.name for p in params_of(fn) if p.required],
            "additionalProperties": False}


def checked(tool: str, fn: Callable[..., Any], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments as keyword arguments of `fn`, or UsageError located at the first bad one. A
    null is an absent argument."""
    params = {p.name: p for p in params_of(fn)}
    takes = ", ".join(f"{p.name} (required)" if p.required else p.name for p in params.values()) or "no arguments"
    for name in arguments:
        _check_text(name, f"{tool}: argument name")
        if name not in params:
            raise UsageError(f"no such argument; {tool} takes {takes}", f"{tool}: {name[:60]!r}")
    kwargs: dict[str, Any] = {}
    for name, p in params.items():
        value = arguments.get(name)
        where = f"{tool}: {name}"
        if value is None:
            if p.required:
                raise UsageError(f"missing; {tool} takes {takes}", where)
            continue
        if isinstance(value, str) and len(value) > MAX_TEXT:
            raise UsageError(f"{len(value):,} characters; kb mcp takes at most {MAX_TEXT:,}", where)
        _check_value(value, where)  # before any value is quoted in a message
        if not _is_kind(value, p.kind):
            from kb.checks.vocab import shown_value

            raise UsageError(f"expected {_NAMES[p.kind]}, got {shown_value(value)}", where)
        if isinstance(value, (dict, list)):
            size = len(json.dumps(value))
            if size > MAX_OBJECT_CHARS:
                raise UsageError(f"{size:,} characters as JSON; kb mcp takes at most {MAX_OBJECT_CHARS:,}", where)
        kwargs[name] = value
    return kwargs


def _is_kind(value: Any, kind: type) -> bool:
    if isinstance(value, bool):
        return False  # JSON's true/false is no number
    if kind is float:
        return isinstance(value, (int, float))
    return isinstance(value, kind)


def _check_value(value: Any, where: str) -> None:
    """No lone surrogate in any string or key, and objects nested at most MAX_OBJECT_NESTING deep
    (an explicit stack of the objects and arrays: a hostile value never meets Python's recursion
    limit)."""
    if isinstance(value, str):
        _check_text(value, where)
    if not isinstance(value, (dict, list)):
        return
    stack: list[tuple[dict[str, Any] | list[Any], str, int]] = [(value, where, 0)]
    while stack:
        item, at, depth = stack.pop()
        if depth >= MAX_OBJECT_NESTING:
            raise UsageError(f"nested deeper than {MAX_OBJECT_NESTING} levels (kb mcp's limit)", where)
        for key, sub in item.items() if isinstance(item, dict) else enumerate(item):
            if isinstance(key, str):
                _check_text(key, at)
            if isinstance(sub, str):
                _check_text(sub, _below(at, key))
            elif isinstance(sub, (dict, list)):
                stack.append((sub, _below(at, key), depth + 1))


def _below(at: str, key: str | int) -> str:
    """The location of an item, kept short: the first levels' keys, then `...`."""
    if at.endswith("...") or at.count(".") + at.count("[") >= 4:
        return at if at.endswith("...") else at + "..."
    return f"{at}.{key[:40]}" if isinstance(key, str) else f"{at}[{key}]"


def _check_text(text: str, where: str) -> None:
    found = _SURROGATE.search(text)
    if found:
        raise UsageError(f"a lone UTF-16 surrogate ({ascii(found.group())[1:-1]}) at character {found.start()}, "
                         "which is not text", where)
