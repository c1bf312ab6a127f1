"""Curated YAML -> plain data and the line of every key and item, in bounded time and memory.

Built from PyYAML's event stream, never its object constructor: aliases (the billion laughs,
`&m [*m]`) and tags other than YAML's core ones (`!!python/name:...`) are refused, nesting and
number lengths are capped, and a value that cannot be read is a located problem, never an
exception. The data is JSON's: mappings with string keys, lists, strings, integers, finite
floats, booleans and null (a date is kept as the text written)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Optional, Union, cast

import yaml

MAX_DEPTH = 20  # nested lists and mappings; the deepest real entry has 5
MAX_NUMBER = 100  # characters of a number (YAML 1.1's base-60 integers cost quadratic time)
_CORE = "tag:yaml.org,2002:"
_ALLOWED_TAGS = {"!"} | {_CORE + t for t in ("str", "int", "float", "bool", "null", "seq", "map")}
_SURROGATE = re.compile("[\ud800-\udfff]")
_TYPED = {_CORE + t for t in ("int", "float", "bool", "null")}  # anything else stays the text written


class YamlProblem(Exception):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line, self.message = line, message


@dataclass
class _Open:
    value: Union[dict[str, Any], list[Any]]
    path: str
    key: Optional[str] = None  # a mapping's key waiting for its value
    keys: set[str] = field(default_factory=set)


def read_yaml(text: str) -> tuple[Any, dict[str, int]]:
    """The one document of `text` and `lines` (dotted path -> 1-based line). Raises YamlProblem."""
    loader: Optional[yaml.SafeLoader] = None
    try:
        loader = yaml.SafeLoader(text)  # its reader refuses NUL and control characters at once
        return _build(loader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise YamlProblem(mark.line + 1 if mark else 1, f"not valid YAML: {e.problem or e.context or e}") from None
    except yaml.reader.ReaderError as e:  # a character YAML does not allow (NUL, a control character)
        raise YamlProblem(text.count("\n", 0, e.position) + 1,
                          f"not valid YAML: character U+{_code(e.character):04X} is not allowed") from None
    except yaml.YAMLError as e:
        raise YamlProblem(1, f"not valid YAML: {e}") from None
    finally:
        if loader is not None:
            loader.dispose()


def _build(loader: yaml.SafeLoader) -> tuple[Any, dict[str, int]]:
    lines: dict[str, int] = {}
    stack: list[_Open] = []
    root: Any = None
    documents = 0
    while loader.check_event():
        event = cast(Any, loader).get_event()  # typeshed leaves the parser's methods untyped
        line = event.start_mark.line + 1 if event.start_mark else 1
        if isinstance(event, yaml.DocumentStartEvent):
            documents += 1
            if documents > 1:
                raise YamlProblem(line, "more than one YAML document (---) in one entry")
            continue
        if isinstance(event, (yaml.StreamStartEvent, yaml.StreamEndEvent, yaml.DocumentEndEvent)):
            continue
        if isinstance(event, yaml.AliasEvent):
            raise YamlProblem(line, f"alias *{event.anchor} is not allowed in curated entries (write the value out)")
        if isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            done = stack.pop()
            root = _attach(stack, done.value, root)
            continue
        assert isinstance(event, (yaml.ScalarEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent))
        tag = event.tag
        if tag is not None and tag not in _ALLOWED_TAGS:
            raise YamlProblem(line, f"tag {_short_tag(tag)} is not allowed in curated entries")
        parent = stack[-1] if stack else None
        if parent is not None and isinstance(parent.value, dict) and parent.key is None:
            if not isinstance(event, yaml.ScalarEvent):
                raise YamlProblem(line, "a key must be a plain name, not a list or a mapping")
            key = _text(str(event.value), line)
            if key in parent.keys:
                raise YamlProblem(line, f"duplicate key {key!r}")
            parent.keys.add(key)
            parent.key = key
            lines[_child(parent.path, key)] = line
            continue
        path = "" if parent is None else _child(parent.path, parent.key if isinstance(parent.value, dict)
                                                else str(len(parent.value)))
        lines.setdefault(path, line)
        if isinstance(event, yaml.ScalarEvent):
            root = _attach(stack, _scalar(loader, event, line), root)
            continue
        if len(stack) >= MAX_DEPTH:
            raise YamlProblem(line, f"nested more than {MAX_DEPTH} levels deep")
        stack.append(_Open({} if isinstance(event, yaml.MappingStartEvent) else [], path))
    return root, lines


def _child(path: str, key: Optional[str]) -> str:
    return f"{path}.{key}" if path else str(key)


def _attach(stack: list[_Open], value: Any, root: Any) -> Any:
    if not stack:
        return value
    parent = stack[-1]
    if isinstance(parent.value, list):
        parent.value.append(value)
    else:
        assert parent.key is not None
        parent.value[parent.key] = value
        parent.key = None
    return root


def _text(value: str, line: int) -> str:
    """A string as written; `"\\ud83d\\udc1b"` (JSON's way to write 🐛) is the one character. A lone
    surrogate (`"\\ud800"`) is no character: it cannot be written out as UTF-8."""
    if not _SURROGATE.search(value):
        return value
    try:
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:
        lone = _SURROGATE.search(value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass"))
        code = ord(lone.group()) if lone else 0xD800
        raise YamlProblem(line, f"a lone surrogate (\\u{code:04x}) is not text: write the character") from None


def _scalar(loader: yaml.SafeLoader, event: yaml.ScalarEvent, line: int) -> Any:
    tag = event.tag
    if tag is None or tag == "!":
        tag = cast(Any, loader).resolve(yaml.ScalarNode, event.value, event.implicit)
    if tag not in _TYPED:
        return _text(event.value, line)
    text = event.value
    if tag in (_CORE + "int", _CORE + "float") and len(text) > MAX_NUMBER:
        raise YamlProblem(line, f"number too long ({len(text)} characters; at most {MAX_NUMBER}): quote it if it is text")
    node = yaml.ScalarNode(tag, text, style=event.style)
    try:
        value = loader.construct_object(node, deep=True)
    except (ValueError, ArithmeticError, LookupError, yaml.YAMLError) as e:  # `!!int ""`: IndexError
        raise YamlProblem(line, f"cannot read {text[:40]!r} as {tag.removeprefix(_CORE)}: {e}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise YamlProblem(line, f"{text[:40]!r} is not a finite number")
    return value


def _code(character: Union[int, str]) -> int:
    return character if isinstance(character, int) else ord(character)


def _short_tag(tag: str) -> str:
    return "!!" + tag.removeprefix(_CORE) if tag.startswith(_CORE) else tag
