"""`kb search` on the pinned release, scored on natural-language queries with the ids a user
would accept (tests/data/search_queries.yaml: most are public issues' titles, labelled from the
message each report quotes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.jobs import scan_release, searcher_for
from kb.scan.source import SourceSpec
from kb.search.score import load_queries, score

pytestmark = pytest.mark.release
QUERIES = Path(__file__).parent / "data" / "search_queries.yaml"
HIT3 = 0.88  # measured 0.892 on 2026-12-02 (bench/search.py); the issue asks 0.90 of a held-out set
# Held out: 167 more public reports in four batches, collected and labelled (from the message each
# quotes) after the ranking was tuned, and never tuned on: what a user's words find today, not a target.
HELD_OUT = Path(__file__).parent / "data" / "search_queries_heldout.yaml"
HELD_OUT_HIT3 = 0.42  # measured 0.431 on 2026-12-02 (0.359 before coordination and public reports)
# Held out too: 137 typed searches (keywords, paraphrases, situations, shorthand) written from the
# curated errors' messages by someone who never saw the ranking; what the issue's "lora rank" is.
TYPED = Path(__file__).parent / "data" / "search_queries_typed.yaml"
TYPED_HIT3 = 0.95  # measured 0.971 on 2026-12-02, the first time it was scored


@pytest.fixture(scope="module")
def spec() -> SourceSpec:
    return SourceSpec(vllm_version="0.33.0")


def test_the_query_set_is_labelled_with_errors_the_release_raises(spec: SourceSpec) -> None:
    queries = load_queries(QUERIES)
    assert len(queries) >= 50
    ids = {s.id for s in scan_release(spec).sites}
    assert all(q.accept and set(q.accept) <= ids for q in queries), [q.text for q in queries if not set(q.accept) <= ids]
    assert sum(q.source != "typed" for q in queries) >= 30  # most come from public reports


def test_hit_at_3_on_the_query_set(spec: SourceSpec) -> None:
    searcher = searcher_for(spec)
    result = score(load_queries(QUERIES), lambda q: [h.id for h in searcher.search(q, 10)])
    assert result.hit3 >= HIT3, "\n".join(f"{t!r}: want {a}, got {g}" for t, a, g in result.misses)
    assert result.mrr >= result.hit1  # MRR counts every first place as 1


def test_the_held_out_set_is_real_and_labelled_with_errors_the_release_raises(spec: SourceSpec) -> None:
    held, tuned = load_queries(HELD_OUT), load_queries(QUERIES)
    assert len(held) >= 167 and all(q.source.startswith("https://github.com/") for q in held)
    assert not {q.source for q in held} & {q.source for q in tuned}  # no report in both sets
    ids = {s.id for s in scan_release(spec).sites}
    assert all(q.accept and set(q.accept) <= ids for q in held), [q.text for q in held if not set(q.accept) <= ids]


def test_the_typed_set_is_held_out_and_labelled_with_errors_the_release_raises(spec: SourceSpec) -> None:
    typed = load_queries(TYPED)
    others = load_queries(QUERIES) + load_queries(HELD_OUT)
    assert len(typed) >= 137 and all(q.source == "typed" for q in typed)
    assert len({q.accept[0] for q in typed}) >= 100  # spread over errors, not one error asked many ways
    assert not {q.text.lower() for q in typed} & {q.text.lower() for q in others}
    ids = {s.id for s in scan_release(spec).sites}
    assert all(q.accept and set(q.accept) <= ids for q in typed), [q.text for q in typed if not set(q.accept) <= ids]


@pytest.mark.parametrize("path, floor", [(HELD_OUT, HELD_OUT_HIT3), (TYPED, TYPED_HIT3)], ids=["real", "typed"])
def test_hit_at_3_on_a_held_out_set_does_not_fall(spec: SourceSpec, path: Path, floor: float) -> None:
    searcher = searcher_for(spec)
    result = score(load_queries(path), lambda q: [h.id for h in searcher.search(q, 10)])
    assert result.hit3 >= floor, "\n".join(f"{t!r}: want {a}, got {g}" for t, a, g in result.misses)


def test_an_error_holding_every_word_outranks_one_word_found_in_many_fields(spec: SourceSpec) -> None:
    """"max_cpu_loras must be >= max_loras" (curated: "lora" in five fields) came before
    "{name} is unsupported LoRA weight" until the coordination factor."""
    searcher = searcher_for(spec)
    assert [h.id for h in searcher.search("unsupported LoRA weight", 3)][0] == "697f9a845163ad4c"
