"""The build's faster paths give what the slower ones they replace give: pygments' Python lexer
(kb/site/lexer.py, kb/site/firstchar.py), lunr's index builder (kb/search/builder.py), the
evaluator's cache key (kb/checks/evaluate.py) and the derived checks computed once per build
(kb/checks/launch_check.py derived_of)."""

from __future__ import annotations

import json
import re

import pytest
from lunr.builder import Builder
from lunr.trimmer import trimmer
from pygments.lexers import PythonLexer

from kb.checks.evaluate import _UNKEPT, _frozen
from kb.checks.launch_check import derived_of
from kb.search.builder import FastBuilder
from kb.search.index import stop_words
from kb.search.stem import register
from kb.site.firstchar import first_test
from kb.site.lexer import FastPythonLexer

CODE = '''#!/usr/bin/env python
"""Module docstring with a "quote" and \\n escapes."""
import os.path as osp
from .x import (a, b as c)

@decorator.attr(1)
class Ñame(Base, metaclass=M):
    """Doc."""
    ſ = 0x1F + 0o17 + 0b1 + 1_000.5e-3j + .5
    def méthode(self, *args, **kw) -> "T":
        x = f"{self.a!r:>{width}} {{literal}} {'nested' + f'{y}'}"
        y = rf"\\d{x}" + Rb"""raw
bytes""" + b'\\x00' + u'uni' + Fr'{x}\\n' + BR"\\\\"
        match x:
            case [1, *rest] if rest: pass
            case {"k": v}: type = 1
        if not (a is None and b in c or d):
            raise ValueError(f"bad {x=}, %s" % y) from None
        lambda q: q ** 2 // 3 @ m
        return ...  # comment
    async def g(self): await h(); yield from z
print("unterminated
x = 'also unterminated
$ ` ? \\
'''


def _tokens(lexer: PythonLexer, text: str) -> list[tuple[int, object, str]]:
    return list(lexer.get_tokens_unprocessed(text))


def test_the_fast_lexer_gives_pygments_tokens() -> None:
    slow, fast = PythonLexer(stripnl=False, ensurenl=False), FastPythonLexer(stripnl=False, ensurenl=False)
    for text in (CODE, CODE[:200], CODE[137:], "", "\n", "'", 'f"{', "x" * 3):
        assert _tokens(fast, text) == _tokens(slow, text)


def test_a_rule_is_never_left_out_where_it_matches() -> None:
    """first_test may say yes wrongly, never no: at every position of the sample, each rule of
    every state of the lexer that matches there passes the test of its first character."""
    lexer = FastPythonLexer()
    for rules in lexer._tokens.values():
        for rexmatch, _, _ in rules:
            test = first_test(rexmatch.__self__)
            for pos in range(len(CODE)):
                if rexmatch(CODE, pos):
                    assert test(CODE[pos]), (rexmatch.__self__.pattern, CODE[pos])


@pytest.mark.parametrize("pattern, yes, no", [
    (r"[^\S\n]+", " \t", "\nx"),
    (r"(?i)(rb|br|r)(\"\"\")", "rRbB", "x\""),
    (r"\d+|[a-c]", "05abc", "xz"),
    (r"(?=x)y|z*", "anything", ""),  # may be empty: any character
    (r"(?:ab)?c", "ac", "b"),
])
def test_first_characters(pattern: str, yes: str, no: str) -> None:
    test = first_test(re.compile(pattern, re.MULTILINE))
    assert all(test(c) for c in yes)
    assert not any(test(c) for c in no)


def _index(builder: Builder, docs: list[dict[str, str | None]]) -> str:
    stemmer = register()
    builder.pipeline.add(trimmer, stop_words(), stemmer)
    builder.search_pipeline.add(stemmer)
    builder.ref("ref")
    for name, boost in (("title", 6), ("text", 1)):
        builder.field(name, boost=boost)
    for n, doc in enumerate(docs):
        builder.add({"ref": str(n), **doc}, {"boost": 1 + n / 10})
    return json.dumps(builder.build().serialize(), sort_keys=True)


def test_the_fast_index_builder_builds_lunrs_index() -> None:
    docs: list[dict[str, str | None]] = [
        {"title": "Tensor-parallel size must divide the number of attention heads", "text": "The GPUs\xa0tried."},
        {"title": "max_model_len is too LARGE: (131072) > derived", "text": None},
        {"title": "", "text": "a an the of --- 'quoted' \"words\" trying tries tried"},
        {"title": "Heads heads HEADS", "text": "tabs\tand\nnewlines\r\fand\vmore"},
    ]
    assert _index(FastBuilder(), docs) == _index(Builder(), docs)


def test_the_evaluators_cache_key_tells_types_apart_and_keeps_no_unhashable_value() -> None:
    assert _frozen({"b": 1, "a": True}) == (("a", (bool, True)), ("b", (int, 1)))
    assert _frozen({"x": 1}) != _frozen({"x": 1.0}) != _frozen({"x": True})
    assert _frozen({"x": [1, {"k": (2,)}]}) == (("x", ("list", ((int, 1), ("dict", (((str, "k"), ("tuple", ((int, 2),))),))))),)
    assert _frozen({"x": float("nan")}) is _UNKEPT
    assert _frozen({"x": [[]]}) is not _UNKEPT and _frozen({"x": [bytearray()]}) is _UNKEPT
    assert _frozen({"x": list(range(999))}) is not _UNKEPT and _frozen({"x": list(range(1000))}) is _UNKEPT
    assert _frozen({str(i): i for i in range(1000)}) is not _UNKEPT
    assert _frozen({str(i): i for i in range(1001)}) is _UNKEPT


def test_the_derived_checks_of_the_same_sites_are_computed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from kb.checks import launch_check

    calls: list[int] = []
    monkeypatch.setattr(launch_check, "derive", lambda sites, model: calls.append(len(sites)) or object())
    monkeypatch.setattr(launch_check, "_DERIVED", [])
    model, sites = object(), [object(), object()]  # only their identity counts
    first = derived_of(sites, model)  # type: ignore[arg-type]
    assert derived_of(list(sites), model) is first  # type: ignore[arg-type]
    assert derived_of(sites[:1], model) is not first  # type: ignore[arg-type]
    assert derived_of(sites[:1], object()) is not first  # type: ignore[arg-type]
    assert calls == [2, 1, 1]
