"""The lines of an excerpt an uncurated error shows: its guard's block down to the raise."""

from __future__ import annotations

from kb.model import Excerpt
from kb.records.present import SHOWN_BEFORE, block_start

CODE = '''def check(self, config):
    heads = config.heads
    if config.dcp > 1:
        per_kv = heads // config.kv
        if per_kv % config.dcp:
            raise ValueError(
                "bad"
            )
    if (
        config.tp > 1
        and config.pp > 1
    ):
        raise ValueError("both")
    else:
        x = 1
        raise ValueError("else")
'''


def excerpt(start: int = 1) -> Excerpt:
    return Excerpt(start, tuple(CODE.splitlines()))


def test_the_outermost_opener_within_reach_with_the_locals_between() -> None:
    # raise at line 6: inner `if` (5), the local (4), the outer `if` (3); the `def` (1) is 5 lines up
    assert block_start(excerpt(), 6) == 1
    # an excerpt that starts below the `def` reaches only the outer `if`; one that starts below that, the inner
    assert block_start(Excerpt(2, tuple(CODE.splitlines()[1:])), 6) == 3
    assert block_start(Excerpt(4, tuple(CODE.splitlines()[3:])), 6) == 5


def test_a_condition_on_several_lines_starts_at_its_if() -> None:
    assert block_start(excerpt(), 13) == 9


def test_else_takes_the_block_above_and_the_limit_holds() -> None:
    got = block_start(excerpt(), 16)
    assert got >= 16 - SHOWN_BEFORE and CODE.splitlines()[got - 1].lstrip().startswith(("if", "else", "def"))


def test_no_opener_near_and_a_line_outside_fall_back_to_two_lines() -> None:
    flat = Excerpt(1, tuple(["x = 1"] * 20 + ["raise ValueError('x')"]))
    assert block_start(flat, 21) == 19
    assert block_start(excerpt(), 99) == 97
