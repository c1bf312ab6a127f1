"""Rebuild an exception's message template from the AST of its argument.

Literal text is kept; every formatted value becomes ``{<source of the expression>}``
(``ast.unparse`` of it, without conversion or format spec), exactly as the public error
site writes templates, so that ids computed from templates agree with theirs.

The helpers are pure: they take AST nodes and a resolver for names, and return a
``Template``. A part that cannot be interpreted as message text (a call we do not know,
an attribute, a name we cannot trace) still becomes ``{<source>}`` but marks the template
unresolved, so callers can count those sites.
"""

from __future__ import annotations

import ast
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

# Returns the expression a name is bound to (already combined across `+=`), or None.
Resolver = Callable[[str], Optional[ast.expr]]

_MAX_DEPTH = 8


@dataclass(frozen=True)
class Template:
    text: str
    unresolved: bool = False
    kind: str = "literal"  # literal, fstring, concat, percent, format, variable, call, other, none


def _no_resolver(_name: str) -> ast.expr | None:
    return None


def placeholder(node: ast.expr) -> str:
    return "{" + ast.unparse(node) + "}"


def template_of(node: ast.expr | None, resolve: Resolver = _no_resolver) -> Template:
    """The message template of the expression passed as an exception's first argument."""
    if node is None:
        return Template("", False, "none")
    text, unresolved = _build(node, resolve, 0)
    return Template(_SURROGATE.sub("\ufffd", text), unresolved, _kind(node, resolve))


# A lone surrogate ("\ud800" in a string literal) cannot be encoded: not for the id, not for any output.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _kind(node: ast.expr, resolve: Resolver) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return "literal"
    if isinstance(node, ast.JoinedStr):
        return "fstring"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return "concat"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return "percent"
    if _is_format_call(node):
        return "format"
    if isinstance(node, ast.Name):
        return "variable" if resolve(node.id) is not None else "other"
    if isinstance(node, ast.Call):
        return "call"
    return "other"


def _build(node: ast.expr, resolve: Resolver, depth: int) -> tuple[str, bool]:
    if depth > _MAX_DEPTH:
        return placeholder(node), True
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            return node.value, False
        return placeholder(node), False
    if isinstance(node, ast.JoinedStr):
        return _joined(node), False
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, lu = _operand(node.left, resolve, depth)
        right, ru = _operand(node.right, resolve, depth)
        return left + right, lu or ru
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        fmt, fu = _build(node.left, resolve, depth + 1)
        if fu or not _is_stringish(node.left, resolve, depth):
            return placeholder(node), True
        return percent_format(fmt, node.right), False
    if _is_format_call(node):
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        fmt, fu = _build(node.func.value, resolve, depth + 1)
        if fu:
            return placeholder(node), True
        return brace_format(fmt, node.args, node.keywords), False
    if isinstance(node, ast.Name):
        bound = resolve(node.id)
        if bound is not None:
            return _build(bound, resolve, depth + 1)
        return placeholder(node), True
    return placeholder(node), True


def _operand(node: ast.expr, resolve: Resolver, depth: int) -> tuple[str, bool]:
    """One side of a `+`: message text when it is text, else a formatted value."""
    if _is_stringish(node, resolve, depth):
        return _build(node, resolve, depth + 1)
    # A value joined to message text, like a formatted value of an f-string.
    return placeholder(node), False


def _is_stringish(node: ast.expr, resolve: Resolver, depth: int = 0) -> bool:
    """Whether the expression builds text: its leftmost operand is text, following names at
    most _MAX_DEPTH times (`a = b; b = a` ends)."""
    while True:
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
            node = node.left
        elif isinstance(node, ast.Name) and depth <= _MAX_DEPTH:
            bound = resolve(node.id)
            if bound is None or bound is node:
                return False
            node, depth = bound, depth + 1
        else:
            break
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    return isinstance(node, ast.JoinedStr) or _is_format_call(node)


def _is_format_call(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, (ast.Constant, ast.JoinedStr, ast.Name, ast.BinOp))
        and not any(isinstance(a, ast.Starred) for a in node.args)
        and all(k.arg is not None for k in node.keywords)
    )


def _joined(node: ast.JoinedStr) -> str:
    parts: list[str] = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            parts.append(str(value.value))
        elif isinstance(value, ast.FormattedValue):
            parts.append(placeholder(value.value))
        else:  # pragma: no cover - JoinedStr only holds these two
            parts.append(placeholder(value))
    return "".join(parts)


_PERCENT = re.compile(r"%(?:\((?P<key>[^)]*)\))?[#0\- +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?(?P<conv>[diouxXeEfFgGcrsa%])")


def percent_format(fmt: str, right: ast.expr) -> str:
    """Apply `%` formatting to a template: each conversion becomes `{<argument source>}`."""
    if isinstance(right, ast.Dict):
        mapping = {
            k.value: v for k, v in zip(right.keys, right.values) if isinstance(k, ast.Constant) and isinstance(k.value, str)
        }
        args: list[ast.expr] = []
    else:
        mapping = {}
        args = list(right.elts) if isinstance(right, ast.Tuple) else [right]
    position = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal position
        if match.group("conv") == "%":
            return "%"
        key = match.group("key")
        if key is not None:
            value = mapping.get(key)
            return placeholder(value) if value is not None else "{" + key + "}"
        if position < len(args):
            position += 1
            return placeholder(args[position - 1])
        return "{" + ast.unparse(right) + "}"

    return _PERCENT.sub(replace, fmt)


def brace_format(fmt: str, args: list[ast.expr], keywords: list[ast.keyword]) -> str:
    """Apply `str.format` to a template: each field becomes `{<argument source>}`."""
    by_name = {k.arg: k.value for k in keywords if k.arg is not None}
    out: list[str] = []
    auto = 0
    try:
        parsed = list(string.Formatter().parse(fmt))
    except ValueError:
        return fmt
    for literal, field, _spec, _conv in parsed:
        out.append(literal)
        if field is None:
            continue
        head, rest = _split_field(field)
        value: ast.expr | None
        if head == "":
            value = args[auto] if auto < len(args) else None
            auto += 1
        elif head.isdigit():
            index = int(head)
            value = args[index] if index < len(args) else None
        else:
            value = by_name.get(head)
        if value is None:
            out.append("{" + field + "}")
        else:
            out.append("{" + ast.unparse(value) + rest + "}")
    return "".join(out)


def _split_field(field: str) -> tuple[str, str]:
    for i, ch in enumerate(field):
        if ch in ".[":
            return field[:i], field[i:]
    return field, ""


def placeholder_spans(template: str) -> list[tuple[int, int]]:
    """Where each placeholder `{...}` of a template is: a balanced pair of braces at the top
    level, so `{sorted({1, n})}` and `{f', x {y}' if y else ''}` are one each. A brace with no
    partner is text. One pass, whatever the text."""
    opened: list[int] = []
    pairs: list[tuple[int, int]] = []
    for i, ch in enumerate(template):
        if ch == "{":
            opened.append(i)
        elif ch == "}" and opened:
            pairs.append((opened.pop(), i + 1))
    spans: list[tuple[int, int]] = []
    for a, b in sorted(pairs):
        if not spans or a >= spans[-1][1]:  # a pair inside another is part of it
            spans.append((a, b))
    return spans


def placeholders(template: str) -> list[str]:
    """The placeholder expressions of a template, in order."""
    return [template[a + 1:b - 1] for a, b in placeholder_spans(template)]


def template_parts(template: str) -> tuple[list[str], list[str]]:
    """Literal parts and placeholder expressions: parts[0] name[0] parts[1] ... parts[-1]."""
    parts, names, last = [], [], 0
    for a, b in placeholder_spans(template):
        parts.append(template[last:a])
        names.append(template[a + 1:b - 1])
        last = b
    parts.append(template[last:])
    return parts, names


def sub_placeholders(template: str, repl: str) -> str:
    """The template with each placeholder replaced by `repl`."""
    parts, _ = template_parts(template)
    return repl.join(parts)


# Bidirectional controls reorder the text shown around them ("Trojan Source"): a title, message or
# source line of the scanned tree that holds one could show words other than its own. Every
# output shows them as a visible escape instead (kb/scan/scanner.py applies this to each site).
_BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """`text` with each bidirectional control written as its escape (`\\u202e`)."""
    return _BIDI_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text) if _BIDI_CONTROLS.search(text) else text
