"""`kb fit`'s usage line lists every option of its parser (it is made from the parser), and so
does the usage on kb fit's documentation page (docs/commands/fit.md)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from kb.cli import parser, usage_of

FIT_DOC = Path(__file__).resolve().parent.parent / "docs/commands/fit.md"


def _fit_parser() -> argparse.ArgumentParser:
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    found = sub.choices["fit"]
    assert isinstance(found, argparse.ArgumentParser)
    return found


def _options(p: argparse.ArgumentParser) -> list[str]:
    return [a.option_strings[0] for a in p._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]


def test_kb_fit_usage_lists_every_option() -> None:
    p = _fit_parser()
    usage = p.format_usage()
    words = set(re.findall(r"--?[\w-]+", usage))
    missing = [o for o in _options(p) if o not in words]
    assert not missing, f"kb fit's usage lacks {missing}: {usage}"
    assert "--gpu-memory-used-gib G" in usage and "--compute-capability X.Y" in usage
    assert usage.startswith("usage: kb fit [--model-config FILE_OR_DIR] (--gpu NAME | --gpu-memory-gib G)")
    assert usage.rstrip().endswith("-- vllm serve MODEL [FLAGS...]")
    assert all(len(line) <= 100 for line in usage.splitlines())


def test_the_documented_usage_of_kb_fit_lists_every_option() -> None:
    section = FIT_DOC.read_text(encoding="utf-8")
    block = section[section.index("```sh"):section.index("```", section.index("```sh") + 5)]
    missing = [o for o in _options(_fit_parser()) if o not in set(re.findall(r"--?[\w-]+", block))]
    assert not missing, f"docs/commands/fit.md's kb fit usage lacks {missing}"


def test_a_new_option_appears_in_the_usage_without_editing_it() -> None:
    p = argparse.ArgumentParser(prog="kb demo")
    p.add_argument("--given", metavar="G")
    p.add_argument("--flag", action="store_true")
    x = p.add_mutually_exclusive_group()
    x.add_argument("--one", metavar="A")
    x.add_argument("--two")
    p.add_argument("--added-later", type=int)
    usage = usage_of(p, "kb demo --given G", "-- TAIL")
    assert usage == "kb demo --given G [--flag] [--one A | --two TWO] [--added-later ADDED_LATER] -- TAIL"
    narrow = usage_of(p, "kb demo --given G", "-- TAIL", width=40)
    assert narrow.splitlines()[1].startswith(" " * len("usage: ")) and len(narrow.splitlines()) > 2
