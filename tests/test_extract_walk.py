"""The statement walks of the scan, made cheaper for the build's speed (#32), give what the plain
walks give: every statement field of each node, each function's own `return`s, every message an
exception's `__init__` passes to its base."""

from __future__ import annotations

import ast
from pathlib import Path

from kb.scan.assignments import is_text
from kb.scan.builders import _own_returns, _own_statements
from kb.scan.calls import _BLOCKS, statement_children
from kb.scan.extract import extract

SOURCES = sorted((Path(__file__).parent.parent / "kb").rglob("*.py"))
GRAMMAR = '''
async def f(x):
    async with x as y:
        async for i in y:
            try:
                pass
            except* ValueError:
                return "a message long enough"
    match x:
        case [1, *rest] if rest:
            return "another message long enough"
        case _:
            while x:
                break
            else:
                return x
'''


def _field_by_field(node: ast.AST) -> list[ast.AST]:
    out: list[ast.AST] = []
    for name in node._fields:
        value = getattr(node, name, None)
        if isinstance(value, list):
            out += [c for c in value if isinstance(c, _BLOCKS)]
    return out


def test_statement_children_are_every_statement_field_of_every_node() -> None:
    trees = [ast.parse(p.read_text(encoding="utf-8")) for p in SOURCES] + [ast.parse(GRAMMAR)]
    seen = 0
    for tree in trees:
        for node in ast.walk(tree):
            assert statement_children(node) == _field_by_field(node), ast.dump(node)[:200]
            seen += 1
    assert seen > 100_000


def test_own_returns_are_those_of_each_function_walked_alone() -> None:
    for source in [*(p.read_text(encoding="utf-8") for p in SOURCES), GRAMMAR]:
        tree = ast.parse(source)
        found = _own_returns(tree)
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                alone = [n for n in _own_statements(fn) if isinstance(n, ast.Return) and n.value is not None
                         and (is_text(n.value) or isinstance(n.value, ast.Name))]
                assert found.get(id(fn), []) == alone


MESSAGE = "The engine is dead: see the stack trace above for the cause"


def test_an_exception_passing_its_message_to_its_base_is_found_however_it_is_written() -> None:
    written = {
        "next line": f'class A(Exception):\n    def __init__(self):\n        super().__init__("{MESSAGE}")\n',
        "same line": f'class A(Exception):\n    def __init__(self): super().__init__("{MESSAGE}")\n',
        "base named": f'class A(Exception):\n    def __init__(self):\n        Exception.__init__(self, "{MESSAGE}")\n',
        "split call": f'class A(Exception):\n    def __init__(self):\n        super(\n        ).__init__(\n'
                      f'            "{MESSAGE}")\n',
        "windows lines": f'class A(Exception):\r\n    def __init__(self):\r\n        super().__init__("{MESSAGE}")\r\n',
    }
    for how, source in written.items():
        builders = extract(source.encode()).builders
        assert [(b.name, b.kind, b.templates) for b in builders] == [("A", "exception", (MESSAGE,))], how
    silent = f'class A(Exception):\n    def __init__(self):\n        self.message = "{MESSAGE}"\n'
    assert extract(silent.encode()).builders == ()
