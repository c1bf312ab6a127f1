"""The shipped public reports (errors/reports/) on the pinned release: each quote is its error's
message, and the lookup finds that error from the quote, a real paste we did not write."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.entries.load import load_entries
from kb.explain.match import explain
from kb.jobs import scan_release, searcher_for
from kb.paths import data_dir
from kb.records.merge import merge
from kb.scan.source import SourceSpec
from kb.search.score import load_queries

pytestmark = pytest.mark.release
DATA = Path(__file__).parent / "data"
LOOKUP_TOP1 = 0.95  # measured 129 of 132 (0.977) on 2026-12-02


@pytest.fixture(scope="module")
def spec() -> SourceSpec:
    return SourceSpec(vllm_version="0.33.0")


def test_every_shipped_report_quotes_an_error_the_release_raises(spec: SourceSpec) -> None:
    loaded = load_entries(data_dir("errors"))
    assert loaded.problems == () and len(loaded.reports) >= 100
    merged = merge(scan_release(spec), loaded.entries, reports=loaded.reports, nearest=False)
    assert [str(p) for p in merged.problems if p.kind in ("orphan", "report") and "/reports/" in p.path] == []
    assert sum(len(r.reports) for r in merged.records) == len(loaded.reports)  # none over the cap of one error


def test_no_report_is_a_query_of_the_search_sets() -> None:
    """A report's title is indexed: one that is also a scored query would score itself."""
    urls = {r.url for r in load_entries(data_dir("errors")).reports}
    queries = load_queries(DATA / "search_queries.yaml") + load_queries(DATA / "search_queries_heldout.yaml")
    assert not urls & {q.source for q in queries}


def test_the_lookup_finds_the_error_of_each_report_from_its_quote(spec: SourceSpec) -> None:
    matcher = searcher_for(spec).matcher
    reports = load_entries(data_dir("errors")).reports
    first = []
    for r in reports:
        found = [f.best for f in explain(r.quote, matcher).found]
        ids = [str(m.entry.get("page") or "") if m.entry.get("older") else m.id for m in found]
        first.append(ids[:1] == [r.id])
    assert sum(first) / len(first) >= LOOKUP_TOP1, [r.quote for r, ok in zip(reports, first) if not ok]
