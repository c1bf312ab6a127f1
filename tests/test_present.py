"""The lines of an excerpt an uncurated error shows: its guard's block down to the raise."""

from __future__ import annotations

from kb.model import Excerpt
from kb.records.present import block_start

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
    if config.a:
        x = 1
        y = 2
        z = 3
        w = 4
        v = 5
    else:
        raise ValueError("else")
'''
LINES = tuple(CODE.splitlines())


def excerpt(start: int = 1) -> Excerpt:
    return Excerpt(start, LINES[start - 1:])


def test_the_outermost_opener_within_reach_with_the_locals_between() -> None:
    # raise at line 6: inner `if` (5), the local (4), the outer `if` (3); the `def` (1) is 5 lines up
    assert block_start(excerpt(), 6) == 1
    # an excerpt that starts below the `def` reaches only the outer `if`; one that starts below that, the inner
    assert block_start(excerpt(2), 6) == 3
    assert block_start(excerpt(4), 6) == 5


def test_a_condition_on_several_lines_starts_at_its_if() -> None:
    assert block_start(excerpt(), 13) == 9


def test_a_long_condition_is_followed_past_the_limit_to_its_if() -> None:
    long_if = ("def f(c):", "    if (", *[f"        c.x{i} > 1 and" for i in range(12)], "        True", "    ):",
               "        raise ValueError('x')")
    e = Excerpt(1, long_if)
    assert block_start(e, len(long_if)) == 2  # the `if`, 15 lines up: its whole condition (the `def` is past reach)
    # cut before the `if`: no opener at all, so only the raise, never a fragment of the condition
    assert block_start(Excerpt(5, long_if[4:]), len(long_if)) == len(long_if)


def test_else_brings_its_if() -> None:
    # the `else` (20) belongs to the `if` at line 14, six lines further up: shown from the `if`
    assert block_start(excerpt(), 21) == 14
    assert LINES[13].strip() == "if config.a:"


def test_a_raise_outside_the_excerpt_or_with_no_opener_is_shown_alone() -> None:
    flat = Excerpt(1, tuple(["x = 1"] * 20 + ["raise ValueError('x')"]))
    assert block_start(flat, 21) == 21
    assert block_start(excerpt(), 99) == 99


def test_async_with_is_an_opener_not_a_def() -> None:
    code = ("async def f(x):", "    async with lock:", "        if x:", "            raise ValueError('x')")
    assert block_start(Excerpt(1, code), 4) == 1


def test_an_uncurated_error_links_six_related_a_curated_one_ten(tmp_path) -> None:
    from entryhelpers import DCP_ENTRY, write_entries
    from kb.entries.load import load_entries
    from kb.records.merge import RELATED_UNCURATED, build_records, merge
    from sitehelpers import fixture_scan

    body = "".join(f"    if x == {i}:\n        raise ValueError('related message number {i}')\n" for i in range(12))
    scan = fixture_scan(tmp_path / "tree", {"vllm/many.py": "def f(x):\n" + body})
    before = {r.id: r.related for r in build_records(scan)}
    many = [i for i, rel in before.items() if len(rel) == 10]
    assert many  # the twelve raises of one function each have ten related
    entries = load_entries(write_entries(tmp_path / "errors", {"dcp.yaml": DCP_ENTRY})).entries
    merged = {r.id: r for r in merge(scan, entries).records}
    assert all(merged[i].related == before[i][:RELATED_UNCURATED] for i in many)
    assert RELATED_UNCURATED == 6
    curated = next(r for r in merged.values() if r.entry is not None)
    assert set(before[curated.id]) <= set(curated.related)  # not cut: a curated error keeps its ten
