from __future__ import annotations

import pytest

from kb.checks.evaluate import evaluate, names_of, readable, to_tree
from kb.errors import ExprError, MissingInput


@pytest.mark.parametrize("expr, env, value", [
    ("(a // b) % c != 0", {"a": 48, "b": 8, "c": 4}, True),
    ("-7 // 2 == -4 and -7 % 2 == 1", {}, True),  # Python's floor semantics
    ("1 < x <= 3", {"x": 3}, True),
    ("q in ('awq', 'gptq') and q not in ['fp8']", {"q": "awq"}, True),
    ("v == None or v is None", {"v": None}, True),
    ("max(a, b) - min([a, b]) + abs(-2) + len('xy')", {"a": 1, "b": 5}, 8),
    ("int(x) + float('1.5') if bool(x) else str(x)", {"x": 2.7}, 3.5),
    ("a and b or c", {"a": 0, "b": 1, "c": 'z'}, 'z'),
    ("2 ** 10", {}, 1024),
])
def test_evaluates_python_semantics(expr: str, env: dict, value: object) -> None:
    assert evaluate(expr, env) == value


@pytest.mark.parametrize("expr, message", [
    ("__import__('os').system('true')", "only calls of abs, bool, float, int, len, max, min, str are allowed"),
    ("x.__class__", "attribute access is not allowed: x.__class__"),
    ("x.real", "attribute access is not allowed: x.real"),
    ("__builtins__", "dunder names are not allowed: __builtins__"),
    ("open('/etc/passwd')", "only calls of"),
    ("(lambda: 1)()", "only calls of"),
    ("[i for i in x]", "ListComp is not allowed"),
    ("f'{x}'", "JoinedStr is not allowed"),
    ("max(*x)", "calls take plain positional arguments only"),
    ("x if (y := 1) else 2", "NamedExpr is not allowed"),
    ("x = 1", "not a Python expression"),
])
def test_whitelist_rejects_everything_else(expr: str, message: str) -> None:
    with pytest.raises(ExprError) as e:
        evaluate(expr, {"x": [1], "y": 2})
    assert message in str(e.value)


def test_missing_input_and_runtime_errors_are_typed() -> None:
    with pytest.raises(MissingInput) as e:
        evaluate("a > 1", {})
    assert e.value.name == "a"
    with pytest.raises(ExprError, match="ZeroDivisionError"):
        evaluate("1 // x", {"x": 0})
    with pytest.raises(ExprError, match="exponent too large"):
        evaluate("10 ** 10 ** 10", {})


@pytest.mark.parametrize("expr, env, message", [
    ("heads % tp", {"heads": "%099999999999d", "tp": 2}, "string formatting is not allowed"),
    ("name * n", {"name": "ab", "n": 10**12}, "repetition too long"),
    ("n * [0]", {"n": 10**9}, "repetition too long"),
])
def test_values_cannot_make_an_expression_fill_memory(expr: str, env: dict, message: str) -> None:
    """Inputs come from untrusted files: a format string or a repeat count is refused, not run."""
    with pytest.raises(ExprError, match=message):
        evaluate(expr, env)



def test_small_repetition_and_integer_modulo_still_work() -> None:
    assert evaluate("heads % tp", {"heads": 7, "tp": 2}) == 1
    assert evaluate("name * n", {"name": "ab", "n": 2}) == "abab"
    assert evaluate("n * [0]", {"n": 2}) == [0, 0]


def test_names_tree_and_readable_form() -> None:
    assert names_of("a > 1 and max(b, c) == None") == ["a", "b", "c"]
    assert to_tree("a // 2 in (1, 2) and not b") == [
        "and", [["cmp", ["bin", "//", ["name", "a"], ["const", 2]], [["in", ["list", [["const", 1], ["const", 2]]]]]],
                ["not", ["name", "b"]]]]
    assert readable("a>1   and not(b)") == "a > 1 and not b"
