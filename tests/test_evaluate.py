from __future__ import annotations

import subprocess
import sys
import textwrap

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
    ("heads % tp", {"heads": "%099999999999d", "tp": 2}, "string formatting with `%` is not allowed: 'heads % tp'"),
    ("name * n", {"name": "ab", "n": 10**12}, "value too large in 'name \\* n'"),
    ("n * [0]", {"n": 10**9}, "value too large in 'n \\* \\[0\\]'"),
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


@pytest.mark.parametrize("expr, message", [
    ("2 ** 4000 * 2 ** 4000 > 0", "number too large in '2 ** 4000 * 2 ** 4000' (more than 4096 bits)"),
    ("x ** 10 ** 6 > 0", "exponent too large"),
    ("x ** 64 ** 2 > 0", "number too large"),
    ("len('a' * 10**9) > 0", "value too large in \"'a' * 10 ** 9\""),
    ("len(10**9 * [0]) > 0", "value too large in '10 ** 9 * [0]'"),
    ("len(['ab'] * 10**5 * 10**5) > 0", "value too large"),
    ("len('%0*d' % (10**9, 1)) > 0", "string formatting with `%` is not allowed: \"'%0*d' % (10 ** 9, 1)\""),
    ("len('%01000000000d' % 1) > 0", "string formatting with `%` is not allowed"),
    ("len('%.1000000f' % 1) > 0", "string formatting with `%` is not allowed"),
    ("'%.4000f' % 1e308 != ''", "string formatting with `%` is not allowed: \"'%.4000f' % 1e+308\""),
    ("x > 1 or '%s' % x", "string formatting with `%` is not allowed"),  # refused even where never evaluated
    ("len(str(['x' * 50000] * 2)) > 0", "value too large"),
    ("int('9' * 4000) > 0", "number too large"),
    ("1e999 > 0", "not a finite number: 1e309"),
    ("x < -1e999", "not a finite number"),
    ("1 // 0", "ZeroDivisionError: integer division or modulo by zero in '1 // 0'"),
    (" + ".join(["1"] * 500), "expression nested too deeply (more than 100 levels)"),
    (" + ".join(["1"] * 2000), "expression nested too deeply (more than 100 levels)"),
    ("-" * 4000 + "1", "expression nested too deeply"),
    ("[" + ",".join(["x"] * 3000) + "]", "expression too large (more than 5000 parts)"),
    ("x > " + "1" * 20000, "expression too long: 20004 characters (at most 10000)"),
    ("(" + ",".join(["len([0] * 49000)"] * 400) + ")", "expression too costly to evaluate (more than 5000000 units"),
])
def test_hostile_expressions_are_refused_before_they_cost(expr: str, message: str) -> None:
    """Every intermediate value is bounded before it is computed, and the expression's size
    and nesting before it is walked: a located ExprError, never a hang, a MemoryError or a
    RecursionError."""
    with pytest.raises(ExprError) as e:
        evaluate(expr, {"x": 3})
    assert message in e.value.message


def test_bounds_leave_ordinary_arithmetic_alone() -> None:
    assert evaluate("2 ** 100 == 1267650600228229401496703205376", {})
    assert evaluate("len('ab' * 1000) + len([0] * 1000) + 7 % 5", {}) == 3002
    assert evaluate(" + ".join(["1"] * 90), {}) == 90
    assert evaluate("(-2) ** 3 + 2 ** -1 + 1 ** (10 ** 100)", {}) == -6.5


def test_an_exponent_tower_is_refused_in_bounded_time() -> None:
    """`MAX_POWER` once checked only the right operand: this ran for ever (in C, where no
    alarm interrupts it), so it runs in a process of its own with a timeout. A guard from
    vLLM's source (an AST, not text) passes the same bounds."""
    script = textwrap.dedent("""
        import ast
        from kb.checks.evaluate import evaluate
        from kb.errors import ExprError
        for expr in ("((((9**64)**64)**64)**64)**64 > 0", ast.parse("n > 1 and (((9**64)**64)**64)**64 > 0", mode="eval").body,
                     ast.parse(" + ".join(["n"] * 2000) + " > 0", mode="eval").body):
            try:
                evaluate(expr, {"n": 2})
            except ExprError as e:
                print(e.message)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout.splitlines() == [
        "exponent too large in '(9 ** 64) ** 64' (the result would have more than 4096 bits)",
        "exponent too large in '(9 ** 64) ** 64' (the result would have more than 4096 bits)",
        "expression nested too deeply (more than 100 levels)",
    ]
