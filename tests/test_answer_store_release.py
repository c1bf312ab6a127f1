"""The answer store of the pinned release answers as the indexes it is compiled from: the real
pastes matched and the labelled queries ranked the same, and its token set gives lunr's terms in
lunr's order for every prefix of the real index's words."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml

from kb.explain.match import Matcher, explain, load_index
from kb.jobs import match_index_for, matcher_for, search_index_for, searcher_for
from kb.releases.published import pinned_release
from kb.scan.source import SourceSpec
from kb.search.query import Searcher, load_search_index, read_search_index
from kb.search.score import load_queries

pytestmark = pytest.mark.release
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="module")
def spec() -> SourceSpec:
    return SourceSpec(vllm_version=pinned_release())


def test_the_store_matches_and_ranks_as_the_indexes(spec: SourceSpec) -> None:
    searcher_for(spec)  # the stores compiled, when they are not yet
    stored = searcher_for(spec)
    assert type(stored.matcher.index["entries"]).__name__ == "Table" and type(stored.words.index.token_set).__name__ \
        == "Terms"  # read from the store
    plain = Searcher(load_search_index(search_index_for(spec)), Matcher(load_index(match_index_for(spec))))
    pastes = [d["paste"] for d in yaml.safe_load((DATA / "real_pastes.yaml").read_text(encoding="utf-8"))
              if isinstance(d, dict) and "paste" in d]
    for paste in pastes[::3]:
        assert repr(explain(paste, matcher_for(spec))) == repr(explain(paste, plain.matcher))
    for query in load_queries(DATA / "search_queries.yaml")[::3]:
        assert stored.search(query.text, 10) == plain.search(query.text, 10), query.text


def test_the_stored_token_set_gives_lunrs_terms_for_every_prefix(spec: SourceSpec) -> None:
    from lunr.token_set import TokenSet

    from kb.search.store import Terms

    terms = [t for t, _ in read_search_index(search_index_for(spec))["index"]["invertedIndex"]]
    whole, stored = TokenSet.from_list(terms), Terms(terms)
    rng = random.Random(0)
    for term in rng.sample(terms, 300):
        for query in (term, *(term[:k] + "*" for k in range(1, len(term) + 1))):
            q = TokenSet.from_string(query)
            assert stored.intersect(q).to_list() == whole.intersect(q).to_list(), query


def test_the_ranking_is_lunrs_on_the_labelled_queries(spec: SourceSpec) -> None:
    from test_answer_store import ranked_as_lunr

    texts = [q.text for name in ("search_queries.yaml", "search_queries_heldout.yaml", "search_queries_typed.yaml")
             for q in load_queries(DATA / name)]
    whole = load_search_index(search_index_for(spec)).index  # lunr's own, loaded whole
    stored = searcher_for(spec).words
    ranked_as_lunr(whole, [*texts[::2], "max model len", "out of memory kv cache", "the of"], stored.index,
                   stored.rows)
