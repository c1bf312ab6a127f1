"""The values the reader computes from source without running it, and how vLLM shows them.

Plain Python values (None, bool, int, float, str, list, tuple, dict) stand for themselves;
the classes below stand for what only the running program would have."""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field
from typing import Any, Optional

from kb.configmodel import JSON

MAX_TEXT = 100_000  # characters of a string built by the reader
MAX_ITEMS = 10_000  # items of a list or dict built by the reader
MAX_INT_BITS = 4_096
SUPPRESS_TEXT = "==SUPPRESS=="  # argparse.SUPPRESS


@dataclass(frozen=True)
class Unknown:
    """What could not be followed; `text` is its source."""

    text: str


@dataclass(frozen=True)
class Builtin:
    """A function or type that is not in the tree (`int`, `json.loads`, `argparse.BooleanOptionalAction`)."""

    name: str
    inner: Optional[str] = None  # of vLLM's `optional_type(<inner>)`: the converter it wraps


@dataclass(frozen=True)
class ModuleRef:
    name: str


@dataclass(frozen=True)
class LiteralType:
    options: tuple[Any, ...]


@dataclass(frozen=True)
class EnumMember:
    cls: str
    member: str
    value: Any


@dataclass(frozen=True)
class Instance:
    """A config class built with its defaults: vLLM shows it as its dataclass repr."""

    cls: str
    fields: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class SetValue:
    items: tuple[Any, ...]


class DictInstance(dict[str, Any]):
    """An instance of a dict subclass (`MultiModalDummyOptions()`): shown as a dict, but not one."""

    def __init__(self, cls: str, items: Optional[dict[str, Any]] = None) -> None:
        super().__init__(items or {})
        self.cls = cls


class FieldKwargs(dict[str, Any]):
    """The argparse keyword arguments vLLM's `get_kwargs` makes for one config field,
    remembering which class and field they came from."""

    def __init__(self, cls: str, name: str, items: Optional[dict[str, Any]] = None,
                 parses_into: Optional[str] = None) -> None:
        super().__init__(items or {})
        self.cls = cls
        self.name = name
        self.parses_into = parses_into  # the config dataclass a JSON value of the field is parsed into
        self.constraints: tuple[tuple[str, Any], ...] = ()  # pydantic's ge, gt, le, lt, ... of the field

    def __deepcopy__(self, memo: dict[int, Any]) -> FieldKwargs:
        return self.like(copy_value(dict(self)))

    def like(self, items: Optional[dict[str, Any]]) -> FieldKwargs:
        """Other keyword arguments, of the same field."""
        out = FieldKwargs(self.cls, self.name, items, self.parses_into)
        out.constraints = self.constraints
        return out


@dataclass
class Group:
    title: str
    description: str


@dataclass
class Parser:
    """The `vllm serve` parser being filled: its actions in the order they were added."""

    actions: list[dict[str, Any]] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)


def copy_value(value: Any) -> Any:
    """copy.deepcopy for the reader's values (bounded by what they can hold)."""
    if isinstance(value, FieldKwargs):
        return value.like({k: copy_value(v) for k, v in value.items()})
    if isinstance(value, DictInstance):
        return DictInstance(value.cls, {k: copy_value(v) for k, v in value.items()})
    if isinstance(value, dict):
        return {k: copy_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_value(v) for v in value]
    return value


MAX_DEPTH = 50  # nesting of a value shown


def plain(value: Any, depth: int = 0) -> tuple[JSON, bool]:
    """(JSON value, exact) as the oracle records an argparse default: exact is False when
    the value had to be written as its repr (bench/oracle/inner/dump_parser.py)."""
    if depth > MAX_DEPTH:
        return "...", False
    if value is None or isinstance(value, (bool, str)):
        return value, True
    if isinstance(value, int):
        return value, True
    if isinstance(value, float):
        return (value, True) if math.isfinite(value) else (repr(value), False)
    if isinstance(value, (list, tuple)) and not isinstance(value, FieldKwargs):
        items = [plain(v, depth + 1) for v in value]
        if all(ok for _, ok in items):
            return [v for v, _ in items], True
        return [v for v, _ in items], False
    if type(value) is dict and all(isinstance(k, str) for k in value):
        pairs = {k: plain(v, depth + 1) for k, v in value.items()}
        if all(ok for _, ok in pairs.values()):
            return {k: v for k, (v, _) in pairs.items()}, True
        return python_repr(value), False
    return python_repr(value), False


def python_repr(value: Any, depth: int = 0) -> str:
    """The text Python's repr() gives for the value vLLM would hold."""
    if depth > MAX_DEPTH:
        return "..."
    if isinstance(value, Unknown):
        return value.text
    if isinstance(value, Instance):
        inner = ", ".join(f"{k}={python_repr(v, depth + 1)}" for k, v in value.fields)
        return f"{value.cls}({inner})"
    if isinstance(value, EnumMember):
        return f"<{value.cls}.{value.member}: {python_repr(value.value, depth + 1)}>"
    if isinstance(value, SetValue):
        if not value.items:
            return "set()"
        return "{" + ", ".join(python_repr(v, depth + 1) for v in value.items) + "}"
    if isinstance(value, (Builtin, ModuleRef)):
        return value.name
    if isinstance(value, LiteralType):
        return f"Literal[{', '.join(python_repr(v, depth + 1) for v in value.options)}]"
    if isinstance(value, list):
        return "[" + ", ".join(python_repr(v, depth + 1) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(python_repr(v, depth + 1) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{python_repr(k, depth + 1)}: {python_repr(v, depth + 1)}"
                               for k, v in value.items()) + "}"
    if isinstance(value, (bool, int, float, str)) or value is None:
        return repr(value)
    return f"<{type(value).__name__}>"


def bounded(value: Any) -> Any:
    """The value, or Unknown when it is larger than the reader keeps."""
    if isinstance(value, str) and len(value) > MAX_TEXT:
        return Unknown("<string too long>")
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
        return Unknown("<integer too large>")
    if isinstance(value, (list, tuple, dict)) and len(value) > MAX_ITEMS:
        return Unknown("<too many items>")
    return value


def source_text(node: ast.AST, limit: int = 500) -> str:
    """A node's source as a short text for a default or a type shown as written; `<source>` when
    it cannot be unparsed."""
    try:
        text = ast.unparse(node)
    except (ValueError, RecursionError):
        return "<source>"
    return text if len(text) <= limit else text[: limit - 1] + "…"
