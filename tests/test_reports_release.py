"""The shipped public reports (errors/reports/) on the pinned release: each quote is its error's
message, and the lookup finds that error from the quote, a real paste we did not write."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb import PINNED_VLLM
from kb.entries.load import load_entries
from kb.jobs import scan_release, searcher_for
from kb.paths import data_dir
from kb.records.lint import lint
from kb.scan.source import SourceSpec
from kb.search.score import load_queries

pytestmark = pytest.mark.release
DATA = Path(__file__).parent / "data"
LOOKUP_TOP1 = 0.95  # measured 176 of 178 (0.989) on 2026-12-02


@pytest.fixture(scope="module")
def spec() -> SourceSpec:
    return SourceSpec(vllm_version=PINNED_VLLM)


@pytest.mark.parametrize("version", [PINNED_VLLM])
def test_every_shipped_report_quotes_an_error_the_release_raises(version: str) -> None:
    """As `kb lint` checks them: each quote is the message of its id, in the release's wording or an
    older one of the same error (the shipped release history), on the pinned release and on the one
    before it. A report on an error the release no longer raises is kept for the releases that
    raise it (a note, with the release that last raised it): none is dropped."""
    loaded = load_entries(data_dir("errors"))
    assert loaded.problems == () and len(loaded.reports) >= 150
    report = lint(scan_release(SourceSpec(vllm_version=version)), data_dir("errors"))
    assert [p for p in report.problems if "/reports/" in p] == []
    kept = [p for p in report.kept if "/reports/" in p]
    assert all("no longer raises" in p and "last raised by" in p for p in kept)
    assert report.reports + len(kept) == len(loaded.reports)  # every one attached or kept


def test_no_report_is_a_query_of_the_search_sets() -> None:
    """A report's title is indexed: one that is also a scored query would score itself."""
    urls = {r.url for r in load_entries(data_dir("errors")).reports}
    queries = load_queries(DATA / "search_queries.yaml") + load_queries(DATA / "search_queries_heldout.yaml")
    assert not urls & {q.source for q in queries}


def test_the_lookup_finds_the_error_of_each_report_from_its_quote(spec: SourceSpec) -> None:
    """A quote pasted into `kb search` (the exact lookup first) leads to its error's page: the id
    the release raises for it (a report written for an older id follows its error; one on an error
    the release no longer raises has no page in it and is not counted)."""
    from kb.jobs import lineage_of
    from kb.releases.lineage import followed

    scan = scan_release(spec)
    lin, raised = lineage_of(scan), {s.id: s for s in scan.sites}
    searcher = searcher_for(spec)
    reports = [(r, followed(lin, r.id, raised)) for r in load_entries(data_dir("errors")).reports]
    # 0.34.0: the 5 kept for the releases that raise them, and 5 quoting an older error whose history
    # ends, that a curated entry declares it `supersedes` (their wording leads there through the lookup)
    assert sum(now is None for _, now in reports) <= 10
    reports = [(r, now) for r, now in reports if now is not None]
    first = [[h.id for h in searcher.search(r.quote, 3)][:1] == [now] for r, now in reports]
    assert sum(first) / len(first) >= LOOKUP_TOP1, [r.quote for (r, _), ok in zip(reports, first) if not ok]
