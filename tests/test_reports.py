"""Public reports (errors/reports/*.yaml): loaded with every problem located, matched against
the error's template by the merge, shown on the page, the record and the Markdown page, and
read by the word search."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from entryhelpers import DCP_MAX, DCP_MAX_FILE, DCP_MAX_ID, DCP_MAX_TEMPLATE, write_entries
from kb.entries.load import load_entries
from kb.mkdocs.pages import error_markdown
from kb.model import Report, Wording
from kb.records.merge import attach_set_by, merge
from kb.records.reports import MAX_REPORTS
from kb.scan.fit import quotes_template
from kb.search.index import boost
from kb.search.query import load_search_index
from kb.site.build import BuildOptions, build_site
from kb.site.views import SiteInfo, error_view
from sitehelpers import fixture_scan

QUOTE = ("ValueError: `--decode-context-parallel-size` (4) exceeds the maximum supported value (2) for "
         "`--tensor-parallel-size` (8) and 4 model KV heads.")
URL = "https://github.com/vllm-project/vllm/issues/12345"


def reports_yaml(*items: tuple[str, str, str, str]) -> str:
    out = ["reports:"]
    for ident, url, title, quote in items:
        out += [f"  - id: {ident}", f"    url: {url}", f"    title: {json.dumps(title)}", f"    quote: {json.dumps(quote)}"]
    return "\n".join(out) + "\n"


def load(tmp_path: Path, files: dict[str, str]) -> tuple[list[Report], list[str]]:
    folder = write_entries(tmp_path / "errors", {})
    write_entries(folder / "reports", files)
    loaded = load_entries(folder)
    return list(loaded.reports), [str(p) for p in loaded.problems]


def test_a_report_file_loads_sorted_with_the_line_of_each_report(tmp_path: Path) -> None:
    text = reports_yaml((DCP_MAX_ID, URL, "DCP   fails\non 8 GPUs", QUOTE),
                        (DCP_MAX_ID, URL.replace("12345", "99"), "Second", QUOTE))
    reports, problems = load(tmp_path, {"dcp.yaml": text})
    assert problems == []
    assert [(r.url, r.title, r.path, r.line) for r in reports] == [
        (URL, "DCP fails on 8 GPUs", "errors/reports/dcp.yaml", 2),  # white space folded
        (URL.replace("12345", "99"), "Second", "errors/reports/dcp.yaml", 6)]
    assert reports[0].quote == QUOTE and reports[0].to_json() == {"url": URL, "title": "DCP fails on 8 GPUs"}


@pytest.mark.parametrize("text, expected", [
    (reports_yaml(("XYZ", URL, "t", "q")), ["errors/reports/bad.yaml:2: id must be 16 lowercase hex characters (got 'XYZ')"]),
    (reports_yaml((DCP_MAX_ID, "https://evil.example/x\"><script>", "t", "q")),
     ["errors/reports/bad.yaml:3: reports.0.url must be a GitHub issue or PR URL (https://github.com/OWNER/REPO/issues/N "
      "or /pull/N), got 'https://evil.example/x\"><script>'"]),
    (reports_yaml((DCP_MAX_ID, URL, "x" * 301, "q")), ["errors/reports/bad.yaml:4: reports.0.title is longer than 300 characters"]),
    (reports_yaml((DCP_MAX_ID, URL, "t", "q")) + "    colour: red\n", ["errors/reports/bad.yaml:6: unknown key 'colour' in reports.0"]),
    (f"reports:\n  - id: {DCP_MAX_ID}\n    url: {URL}\n    title: t\n", ["errors/reports/bad.yaml:2: missing field 'quote' in reports.0"]),
    ("- just a list\n", ["errors/reports/bad.yaml:1: the entry must be a mapping (got a list)"]),
    ("reports: [\n", ["errors/reports/bad.yaml:2: not valid YAML: expected the node content, but found '<stream end>'"]),
])
def test_every_report_file_problem_is_located_and_the_file_left_out(tmp_path: Path, text: str, expected: list[str]) -> None:
    reports, problems = load(tmp_path, {"bad.yaml": text})
    assert problems == expected and reports == []


def test_a_report_listed_twice_is_located(tmp_path: Path) -> None:
    scan = fixture_scan(tmp_path / "tree", {DCP_MAX_FILE: DCP_MAX})
    one = reports_yaml((DCP_MAX_ID, URL, "t", QUOTE))
    reports, problems = load(tmp_path, {"a.yaml": one, "b.yaml": one})
    assert problems == [] and [r.path for r in reports] == ["errors/reports/a.yaml", "errors/reports/b.yaml"]
    merged = merge(scan, [], reports=reports)
    assert [str(p) for p in merged.problems] == [f"errors/reports/b.yaml:2: report {URL} is listed twice for "
                                                 f"{DCP_MAX_ID}: also at errors/reports/a.yaml:2 (as {DCP_MAX_ID})"]
    assert [r.path for r in next(r for r in merged.records if r.id == DCP_MAX_ID).reports] == ["errors/reports/a.yaml"]


def test_a_quote_is_the_message_with_or_without_its_class_cut_off_after_a_value() -> None:
    assert quotes_template(DCP_MAX_TEMPLATE, QUOTE)
    assert quotes_template(DCP_MAX_TEMPLATE, QUOTE.removeprefix("ValueError: "))
    assert quotes_template(DCP_MAX_TEMPLATE, "(EngineCore pid=1) " + QUOTE)  # inside a longer line
    assert quotes_template(DCP_MAX_TEMPLATE, QUOTE.rsplit(" and ", 1)[0])  # cut off after the TP size
    assert not quotes_template(DCP_MAX_TEMPLATE, "`--decode-context-parallel-size` (4) exceeds")  # too little kept
    assert not quotes_template(DCP_MAX_TEMPLATE, QUOTE.replace("exceeds", "is below"))
    assert not quotes_template("{e}", "anything at all")  # a template of no words is nobody's quote


def merged_with(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    scan = fixture_scan(tmp_path / "tree", {DCP_MAX_FILE: DCP_MAX})
    folder = write_entries(tmp_path / "errors", {})
    write_entries(folder / "reports", {"r.yaml": text})
    loaded = load_entries(folder)
    assert loaded.problems == ()
    return scan, merge(scan, loaded.entries, reports=loaded.reports)


def test_the_merge_attaches_reports_whose_quote_is_the_message_and_locates_the_others(tmp_path: Path) -> None:
    text = reports_yaml((DCP_MAX_ID, URL, "DCP size 4 rejected", QUOTE),
                        (DCP_MAX_ID, URL.replace("12345", "7"), "Wrong quote", "ValueError: something else entirely"),
                        ("0123456789abcdef", URL, "Orphan", QUOTE))
    _, merged = merged_with(tmp_path, text)
    record = next(r for r in merged.records if r.id == DCP_MAX_ID)
    assert [r.title for r in record.reports] == ["DCP size 4 rejected"]
    assert [(p.kind, str(p)) for p in merged.problems] == [
        ("orphan", f"errors/reports/r.yaml:10: report {URL}: id 0123456789abcdef is not raised in 0.1.0"),
        ("report", f"errors/reports/r.yaml:6: report {URL.replace('12345', '7')}: its quote is not the message of "
                   f"{DCP_MAX_ID} ({DCP_MAX_TEMPLATE[:120]!r}) nor an older wording of it")]
    assert sum(len(r.reports) for r in merged.records) == 1


def test_a_report_for_an_older_id_follows_its_alias(tmp_path: Path) -> None:
    scan = fixture_scan(tmp_path / "tree", {DCP_MAX_FILE: DCP_MAX})
    old = Report("0123456789abcdef", URL, "Old wording", QUOTE, "errors/reports/r.yaml", 2)
    merged = merge(scan, [], aliases={"0123456789abcdef": (DCP_MAX_ID, "edited", "0.1.0")}, reports=[old])
    assert merged.problems == () and next(r for r in merged.records if r.id == DCP_MAX_ID).reports == (old,)


def test_a_report_quoting_an_older_wording_counts_for_the_current_error(tmp_path: Path) -> None:
    scan = fixture_scan(tmp_path / "tree", {DCP_MAX_FILE: DCP_MAX})
    old_quote = "ValueError: DCP size (4) is too large for TP (8)."
    old = Wording("0123456789abcdef", "DCP size ({dcp}) is too large for TP ({tp}).", DCP_MAX_FILE, 9, "f", "ValueError",
                  "0.0.1", "0.0.9", DCP_MAX_ID, "0.1.0", DCP_MAX_ID)
    written_for_current = Report(DCP_MAX_ID, URL, "Old DCP message", old_quote, "errors/reports/r.yaml", 2)
    written_for_old = replace(written_for_current, id="0123456789abcdef", url=URL + "0", line=6)
    merged = merge(scan, [], reports=[written_for_current, written_for_old], wordings=[old])
    assert merged.problems == ()
    assert [r.url for r in next(r for r in merged.records if r.id == DCP_MAX_ID).reports] == [URL, URL + "0"]
    alone = merge(scan, [], reports=[written_for_current])  # without the history the old words are no quote
    assert [p.kind for p in alone.problems] == ["report"] and "nor an older wording" in str(alone.problems[0])


def test_at_most_max_reports_per_error_the_first_by_number(tmp_path: Path) -> None:
    many = [(DCP_MAX_ID, f"https://github.com/o/r/issues/{n}", f"t{n}", QUOTE) for n in range(95, 95 + MAX_REPORTS + 3)]
    _, merged = merged_with(tmp_path, reports_yaml(*many))
    record = next(r for r in merged.records if r.id == DCP_MAX_ID)
    assert [r.url for r in record.reports] == [u for _, u, _, _ in many][:MAX_REPORTS]  # 10, 11, ... by number


EVIL_TITLE = 'DCP <script>alert(1)</script> & `code` [x](javascript:alert(1)) *crash*'


def test_the_page_record_markdown_and_search_show_a_report_escaped(tmp_path: Path) -> None:
    scan, merged = merged_with(tmp_path, reports_yaml((DCP_MAX_ID, URL, EVIL_TITLE + " zebrafish", QUOTE)))
    out = tmp_path / "site"
    build_site(scan, BuildOptions(out, jobs=1), attach_set_by(list(merged.records), scan.config))
    page = (out / "errors" / DCP_MAX_ID / "index.html").read_text(encoding="utf-8")
    assert '<h3 id="reports">Public reports</h3>' in page
    assert (f'<li><a href="{URL}">DCP &lt;script&gt;alert(1)&lt;/script&gt; &amp; `code` [x](javascript:alert(1)) '
            f'*crash* zebrafish</a> <small>vllm-project/vllm/issues/12345</small></li>') in page
    assert "<script>alert" not in page
    record = json.loads((out / "api" / "errors" / DCP_MAX_ID).read_text(encoding="utf-8"))
    assert record["kb"]["reports"] == [{"url": URL, "title": EVIL_TITLE + " zebrafish"}]
    other = next(p for p in (out / "api" / "errors").iterdir() if p.name not in (DCP_MAX_ID, "index.json", "index.html"))
    assert json.loads(other.read_text(encoding="utf-8"))["kb"]["reports"] == []
    # the word only the report's title holds finds the error
    assert load_search_index(out / "api" / "search-index.json.gz").words("zebrafish", 3)[0].id == DCP_MAX_ID
    record_obj = next(r for r in merged.records if r.id == DCP_MAX_ID)
    info = SiteInfo(scan.tree)
    md = error_markdown(error_view(record_obj, info, []), info, {record_obj.id: record_obj.title}, "../")
    line = next(x for x in md.splitlines() if URL in x)  # one line of HTML: no extension's markup
    assert line == (f'<ul class="kb-reports"><li><a href="{URL}">DCP &lt;script&gt;alert(1)&lt;/script&gt; &amp; `code` '
                    f'[x](javascript:alert(1)) *crash* zebrafish</a> <small>vllm-project/vllm/issues/12345</small></li></ul>')


def test_each_report_raises_an_error_in_search_curated_or_not(tmp_path: Path) -> None:
    two = [(DCP_MAX_ID, f"https://github.com/o/r/issues/{n}", f"t{n}", QUOTE) for n in (1, 2)]
    _, merged = merged_with(tmp_path, reports_yaml(*two))
    record = next(r for r in merged.records if r.id == DCP_MAX_ID)
    assert boost(record) == pytest.approx(1.2) and boost(replace(record, reports=())) == 1.0


def test_reports_are_kept_by_repository_and_number_and_one_url_once_per_error(tmp_path: Path) -> None:
    scan = fixture_scan(tmp_path / "tree", {DCP_MAX_FILE: DCP_MAX})
    old = Wording("0123456789abcdef", DCP_MAX_TEMPLATE, "vllm/old.py", 9, "f", "ValueError", "0.0.1", "0.0.9",
                  DCP_MAX_ID, "0.1.0", DCP_MAX_ID)
    mk = lambda n, ident=DCP_MAX_ID, line=2: Report(ident, f"https://github.com/o/r/issues/{n}", f"t{n}", QUOTE,  # noqa: E731
                                                    "errors/reports/r.yaml", line)
    pull = replace(mk(98), url="https://github.com/o/r/pull/98")
    same_thread = replace(mk(100), url="https://github.com/O/R/pull/100", line=12)  # issue 100's thread
    merged = merge(scan, [], reports=[mk(100), mk(99), pull, mk(99, "0123456789abcdef", 9), same_thread],
                   wordings=[old])
    assert [r.url.split("github.com/", 1)[1] for r in next(r for r in merged.records if r.id == DCP_MAX_ID).reports] \
        == ["o/r/pull/98", "o/r/issues/99", "o/r/issues/100"]  # by number, issues and pull requests alike
    assert [str(p) for p in merged.problems] == [
        f"errors/reports/r.yaml:9: report https://github.com/o/r/issues/99 is listed twice for {DCP_MAX_ID}: also at "
        f"errors/reports/r.yaml:2 (as {DCP_MAX_ID})",
        f"errors/reports/r.yaml:12: report https://github.com/O/R/pull/100 is listed twice for {DCP_MAX_ID}: also at "
        f"errors/reports/r.yaml:2 (as {DCP_MAX_ID})"]


@pytest.mark.parametrize("text, expected", [
    (reports_yaml((DCP_MAX_ID, URL, "   ", QUOTE)), ["errors/reports/bad.yaml:4: reports.0.title is empty"]),
    (reports_yaml((DCP_MAX_ID, json.dumps(URL + "\n"), "t", QUOTE)),
     ["errors/reports/bad.yaml:3: reports.0.url must be a GitHub issue or PR URL alone (no white space, no final "
      "newline, no '.' or '..' for a name)"]),
    (reports_yaml((DCP_MAX_ID, "https://github.com/../../issues/3", "t", QUOTE)),
     ["errors/reports/bad.yaml:3: reports.0.url must be a GitHub issue or PR URL alone (no white space, no final "
      "newline, no '.' or '..' for a name)"]),
    (reports_yaml((json.dumps(DCP_MAX_ID + "\n"), URL, "t", QUOTE)),
     ["errors/reports/bad.yaml:2: reports.0.id must be 16 lowercase hex characters alone, without white space or a "
      "final newline"]),
    (reports_yaml((DCP_MAX_ID, URL, "t", QUOTE)).replace('title: "t"', 'title: !!int ""'),
     ["errors/reports/bad.yaml:4: cannot read '' as int: string index out of range"]),
    (reports_yaml((DCP_MAX_ID, URL, "sur \\ud800 x", QUOTE)).replace('"sur \\\\ud800 x"', '"sur \\ud800 x"'),
     ["errors/reports/bad.yaml:4: a lone surrogate (\\ud800) is not text: write the character"]),
])
def test_what_the_schema_lets_through_is_located_too(tmp_path: Path, text: str, expected: list[str]) -> None:
    reports, problems = load(tmp_path, {"bad.yaml": text})
    assert problems == expected and reports == []


def test_a_template_with_too_little_text_cannot_be_quoted(tmp_path: Path) -> None:
    scan = fixture_scan(tmp_path / "tree", {"vllm/short.py": 'def f(x):\n    raise ValueError(f"Bad {x}")\n'})
    ident = next(s.id for s in scan.sites if s.template == "Bad {x}")
    merged = merge(scan, [], reports=[Report(ident, URL, "t", "ValueError: Bad dtype", "errors/reports/r.yaml", 2)])
    assert [p.kind for p in merged.problems] == ["report"] and "too little text" in str(merged.problems[0])
    assert not quotes_template("Bad {x}", "Bad thing") and not quotes_template("{a}{b}", "x y")
    assert quotes_template("Unsupported {x}", "Unsupported thing")  # 11 characters of its own: enough


def test_an_emoji_written_as_a_json_escape_is_the_character(tmp_path: Path) -> None:
    reports, problems = load(tmp_path, {"r.yaml": reports_yaml((DCP_MAX_ID, URL, "crash \U0001f41b on start", QUOTE))})
    assert '"crash \\ud83d\\udc1b on start"' in reports_yaml((DCP_MAX_ID, URL, "crash \U0001f41b on start", QUOTE))
    assert problems == [] and reports[0].title == "crash \U0001f41b on start"
