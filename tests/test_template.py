from __future__ import annotations

import ast

import pytest

from kb.scan.messages import (
    brace_format,
    percent_format,
    placeholder_spans,
    placeholders,
    sub_placeholders,
    template_of,
    template_parts,
)


def tpl(expr: str, **bindings: str):
    node = ast.parse(expr, mode="eval").body
    bound = {k: ast.parse(v, mode="eval").body for k, v in bindings.items()}
    return template_of(node, bound.get)


@pytest.mark.parametrize(
    "expr, text, kind",
    [
        ('"plain message"', "plain message", "literal"),
        ('"adjacent " "literals"', "adjacent literals", "literal"),
        ('f"heads ({n}) must divide ({tp})."', "heads ({n}) must divide ({tp}).", "fstring"),
        ('f"{x!r:>10} and {y.attr[0]:d}"', "{x} and {y.attr[0]}", "fstring"),
        ('"a " f"{b}" " c " f"{d // e}"', "a {b} c {d // e}", "fstring"),
        ('"value " + str(v) + " is bad"', "value {str(v)} is bad", "concat"),
        ('"one of " + ", ".join(names)', "one of {', '.join(names)}", "concat"),
        ('"got %d of %s" % (n, kind)', "got {n} of {kind}", "percent"),
        ('"got %s" % value', "got {value}", "percent"),
        ('"got %(a)s and %(b)r, 100%%" % {"a": x, "b": y.z}', "got {x} and {y.z}, 100%", "percent"),
        ('"{} and {}".format(a, b)', "{a} and {b}", "format"),
        ('"{1} then {0}".format(a, b)', "{b} then {a}", "format"),
        ('"{name:>4} at {where.line}".format(name=n, where=w)', "{n} at {w.line}", "format"),
        ('"{0[1]}".format(items)', "{items[1]}", "format"),
    ],
)
def test_template_forms(expr: str, text: str, kind: str) -> None:
    t = tpl(expr)
    assert (t.text, t.kind, t.unresolved) == (text, kind, False)


def test_variable_is_followed() -> None:
    t = tpl("msg", msg='f"bad {x}"')
    assert (t.text, t.kind, t.unresolved) == ("bad {x}", "variable", False)


def test_variable_template_with_format() -> None:
    t = tpl("ERR.format(expected=a, actual=len(b))", ERR='"expected {expected}, got {actual}"')
    assert (t.text, t.unresolved) == ("expected {a}, got {len(b)}", False)


@pytest.mark.parametrize(
    "expr, text",
    [
        ("msg", "{msg}"),
        ("str(e)", "{str(e)}"),
        ("make_message(a, b)", "{make_message(a, b)}"),
        ("result.error.message", "{result.error.message}"),
        ("fmt % args", "{fmt % args}"),
    ],
)
def test_unresolved_parts_stay_useful_and_are_flagged(expr: str, text: str) -> None:
    t = tpl(expr)
    assert (t.text, t.unresolved) == (text, True)


def test_no_message() -> None:
    t = template_of(None)
    assert (t.text, t.kind, t.unresolved) == ("", "none", False)


def test_non_string_constant_is_a_value() -> None:
    assert tpl("42").text == "{42}"


def test_percent_and_brace_helpers() -> None:
    arg = ast.parse("x", mode="eval").body
    assert percent_format("%5.2f%% done, %s", ast.Tuple(elts=[arg, arg], ctx=ast.Load())) == "{x}% done, {x}"
    assert brace_format("{} {}", [arg], []) == "{x} {}"  # a missing argument keeps its field
    assert brace_format("{{literal}} {}", [arg], []) == "{literal} {x}"


def test_placeholders() -> None:
    assert placeholders("a ({num_q_per_kv}) b ({dcp})") == ["num_q_per_kv", "dcp"]


@pytest.mark.parametrize("template, parts, names", [
    # a placeholder holding braces is one placeholder: a set, a nested f-string (vLLM's "Engine core
    # initialization failed ... Failed core proc(s): {finished}{f', failed frontend ...' if ... else ''}")
    ("valid sizes are {sorted({1, pcp})}.", ["valid sizes are ", "."], ["sorted({1, pcp})"]),
    ("procs: {finished}{f', failed {n}' if n else ''}", ["procs: ", "", ""], ["finished", "f', failed {n}' if n else ''"]),
    ("expected { got {x}", ["expected { got ", ""], ["x"]),  # a brace with no partner is text
    ("{a} } {", ["", " } {"], ["a"]),
    ("no placeholder", ["no placeholder"], []),
])
def test_placeholders_are_balanced_braces(template: str, parts: list[str], names: list[str]) -> None:
    assert template_parts(template) == (parts, names)
    assert sub_placeholders(template, "{}") == "{}".join(parts)


def test_placeholder_spans_take_linear_time_on_hostile_braces() -> None:
    import time

    start = time.monotonic()
    assert placeholder_spans("{" * 200_000 + "x") == [] and len(placeholder_spans("{}" * 100_000)) == 100_000
    assert placeholder_spans("{a" * 50_000 + "}" * 50_000) == [(0, 150_000)]
    assert time.monotonic() - start < 30  # a generous bound: one pass takes milliseconds, a quadratic one hours
