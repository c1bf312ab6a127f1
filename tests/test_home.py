"""A newcomer's first look (#32): the home page leads with the paste box and the errors users hit
most (by their public reports), the full curated list has pages of its own, and an error id that
curated prose cites becomes a link to that error's page under its title."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from entryhelpers import DCP_ENTRY, DCP_ID, DCP_MAX, DCP_MAX_FILE, DCP_MAX_ID, MEANING, write_entries
from kb.entries.load import load_entries
from kb.entries.markdown import to_html, to_inline_html
from kb.model import Report
from kb.records.merge import attach_set_by, merge
from kb.records.reports import MAX_REPORTS
from kb.site.build import BuildOptions, build_site
from kb.site.home import first_sentence, top_errors
from kb.site.linkcheck import broken_links
from sitehelpers import fixture_scan

LINKS = {"66df3e6fd6142523": ("../66df3e6fd6142523/", "Size <b>{n}</b> & \"more\""),
         "8ce9b4cdaf700441": ("../8ce9b4cdaf700441/", "Other")}
UNKNOWN = "0123456789abcdef"


# --- error ids in curated prose ------------------------------------------------------------------
def test_a_known_id_becomes_a_link_under_its_title_escaped() -> None:
    html = str(to_html(f"DCP 3 still fails with 66df3e6fd6142523 (3 > 2), not {UNKNOWN}.", links=LINKS))
    assert html == ('<p>DCP 3 still fails with “<a class="error-ref" href="../66df3e6fd6142523/" '
                    'title="error 66df3e6fd6142523">Size &lt;b&gt;{n}&lt;/b&gt; &amp; "more"</a>” (3 &gt; 2), '
                    f"not {UNKNOWN}.</p>")


def test_an_id_alone_in_a_code_span_is_linked_other_code_links_and_blocks_are_not() -> None:
    text = ("the variant is `8ce9b4cdaf700441`; `x = 66df3e6fd6142523` stays; [see 66df3e6fd6142523](#a) stays; "
            "*two: 66df3e6fd6142523 and 8ce9b4cdaf700441*\n\n```\n66df3e6fd6142523\n```\n")
    html = str(to_html(text, links=LINKS))
    assert 'the variant is “<a class="error-ref" href="../8ce9b4cdaf700441/" title="error 8ce9b4cdaf700441">Other</a>”;' \
        in html
    assert "<code>x = 66df3e6fd6142523</code>" in html and '<a href="#a">see 66df3e6fd6142523</a>' in html
    assert ('<em>two: “<a class="error-ref" href="../66df3e6fd6142523/" title="error 66df3e6fd6142523">Size '
            '&lt;b&gt;{n}&lt;/b&gt; &amp; "more"</a>” and “<a class="error-ref" href="../8ce9b4cdaf700441/" '
            'title="error 8ce9b4cdaf700441">Other</a>”</em>') in html
    assert "<code>66df3e6fd6142523\n</code>" in html  # a fenced block is code, as written
    assert html.count("error-ref") == 3


def test_without_links_or_with_a_longer_hex_run_nothing_changes() -> None:
    assert str(to_inline_html("see 66df3e6fd6142523")) == "see 66df3e6fd6142523"
    assert str(to_inline_html("commit 66df3e6fd6142523aa and x66df3e6fd6142523", links=LINKS)) == \
        "commit 66df3e6fd6142523aa and x66df3e6fd6142523"
    assert str(to_inline_html("see 66df3e6fd6142523")) == "see 66df3e6fd6142523"  # the links do not stay behind


# --- the home page -------------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("One sentence. Two.", "One sentence."),
    ("Ends at `a. B` code and e.g. a list. Then.", "Ends at `a. B` code and e.g. a list."),
    ("vLLM 0.8.0 is new. vLLM then checks.", "vLLM 0.8.0 is new."),
    ("word " * 60, ("word " * 36).strip() + " …"),
    ("A\nfolded\n  line.", "A folded line."),
])
def test_the_first_sentence_is_one_line(text: str, expected: str) -> None:
    assert first_sentence(text) == expected


DCP_QUOTE = ("ValueError: The model's number of query heads per KV head (6) must be divisible by "
             "`--decode-context-parallel-size` (4) for GQA/MQA.")
MAX_QUOTE = ("ValueError: `--decode-context-parallel-size` (4) exceeds the maximum supported value (2) for "
             "`--tensor-parallel-size` (8) and 4 model KV heads.")


def reports_file(counts: dict[str, tuple[int, str]]) -> str:
    out = ["reports:"]
    for ident, (n, quote) in counts.items():
        for k in range(n):
            out += [f"  - id: {ident}", f"    url: https://github.com/o/r/issues/{int(ident[:4], 16)}{k}",
                    f"    title: report {k}", f"    quote: {quote!r}"]
    return "\n".join(out) + "\n"


def cited_entry() -> str:
    """The DCP entry, its meaning citing the other curated error and an id no release raises."""
    return DCP_ENTRY.replace(MEANING, f"{MEANING} A DCP above the maximum fails first with {DCP_MAX_ID}; "
                                      f"{UNKNOWN} is no error.", 1)


def curated_site(tmp_path: Path, reports: dict[str, tuple[int, str]]) -> Path:
    from entryhelpers import DCP_MAX_ENTRY

    scan = fixture_scan(tmp_path / "tree", {DCP_MAX_FILE: DCP_MAX})
    errors = write_entries(tmp_path / "errors", {"dcp.yaml": cited_entry(), "max.yaml": DCP_MAX_ENTRY})
    if reports:
        write_entries(errors / "reports", {"r.yaml": reports_file(reports)})
    loaded = load_entries(errors)
    assert loaded.problems == ()
    merged = merge(scan, loaded.entries, reports=loaded.reports)
    assert merged.problems == ()
    out = tmp_path / "site"
    build_site(scan, BuildOptions(out, jobs=1), attach_set_by(list(merged.records), scan.config))
    return out


def test_the_home_page_lists_the_most_reported_errors_first_and_links_every_curated_one(tmp_path: Path) -> None:
    """By reports, not by title: "The model's …" (2 reports) before "`--decode-context-parallel-size` …" (1),
    each with the first sentence of its meaning; the full list is at /curated/."""
    site = curated_site(tmp_path, {DCP_ID: (2, DCP_QUOTE), DCP_MAX_ID: (1, MAX_QUOTE)})
    home = (site / "index.html").read_text()
    top = re.search(r'<ol class="top">(.*?)</ol>', home, re.S)
    assert top is not None
    assert re.findall(r'<a class="title" href="errors/(\w+)/">', top.group(1)) == [DCP_ID, DCP_MAX_ID]
    assert re.findall(r'<a class="count" href="errors/\w+/#reports">([^<]*)</a>', top.group(1)) == ["2 reports",
                                                                                                      "1 report"]
    assert '<span class="gist">Decode context parallelism splits the query heads' in top.group(1)
    assert home.index('<textarea id="q"') < home.index('<ol class="top">')  # the paste box leads
    assert '<form class="quick"' not in home  # and is the only one on the page
    # the counts are true: every error of the release, the files that raise them, those scanned
    ids = len(list((site / "errors").iterdir()))
    assert f"<strong>2 of {ids} errors curated</strong>" in home
    assert re.search(rf"{ids} errors at \d+ raise sites in \d+ of the \d+ files scanned", home)
    assert '<a href="curated/">All 2 curated errors</a>' in home and 'href="releases/"' in home
    listed = (site / "curated/index.html").read_text()
    assert listed.index(f'errors/{DCP_MAX_ID}/') < listed.index(f'errors/{DCP_ID}/')  # by title
    assert broken_links(site) == []


def test_a_cited_id_links_to_its_page_under_its_title(tmp_path: Path) -> None:
    site = curated_site(tmp_path, {})
    page = (site / f"errors/{DCP_ID}/index.html").read_text()
    assert (f'fails first with “<a class="error-ref" href="../../errors/{DCP_MAX_ID}/" title="error {DCP_MAX_ID}">'
            "`--decode-context-parallel-size` ({decode_context_parallel_size}) exceeds") in page
    assert f"; {UNKNOWN} is no error." in page
    home = (site / "index.html").read_text()
    assert '<ol class="top">' not in home and '<a href="curated/">All 2 curated errors</a>' in home


def test_top_errors_are_curated_reported_at_most_fifteen_and_say_when_there_may_be_more(tmp_path: Path) -> None:
    scan = fixture_scan(tmp_path / "tree", {DCP_MAX_FILE: DCP_MAX})
    loaded = load_entries(write_entries(tmp_path / "errors", {"dcp.yaml": DCP_ENTRY}))
    records = list(merge(scan, loaded.entries).records)
    rep = Report(DCP_ID, "https://github.com/o/r/issues/1", "t", "q", "errors/reports/r.yaml", 1)
    many = [replace(r, reports=(rep,) * MAX_REPORTS) if r.id == DCP_ID else replace(r, reports=(rep,))
            for r in records]  # an error without an entry is not listed, however often reported
    top = top_errors(many)
    assert [(t.id, t.reports, t.more) for t in top] == [(DCP_ID, MAX_REPORTS, True)]
    assert top_errors(records) == []
