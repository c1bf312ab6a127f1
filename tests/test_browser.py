"""Real-browser tests: Debian's chromium driven by Playwright (never `playwright install`)."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from kb.records.merge import attach_set_by
from kb.site.serve import make_server
from sitehelpers import LOOKUP_PASTES, build_fixture, build_lookup_fixture, pages_like_host, unpacked_json

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--disable-quic"]
DCP = "d97d5d8528e2b364"
FILLED = ("ValueError: The model's number of query heads per KV head (6) must be divisible by "
          "`--decode-context-parallel-size` (4) for GQA/MQA.")
SHOTS = Path(os.environ.get("KB_SCREENSHOTS", Path(__file__).parent.parent / "bench" / "out"))

if not Path(CHROMIUM).exists() or shutil.which(CHROMIUM) is None:
    if os.environ.get("CI"):
        raise RuntimeError("CI must install Debian's chromium for the browser tests (see .ci/run)")
    pytest.skip("Debian's chromium is not installed", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")
Image = pytest.importorskip("PIL.Image")


@contextlib.contextmanager
def serving(site: Path) -> Iterator[str]:
    """`kb serve`'s server on a free port, in a thread, for the block; its base URL."""
    srv = make_server(site, 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory):
    site, _ = build_fixture(tmp_path_factory.mktemp("browser"))
    with serving(site) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


def assert_not_blank(png: bytes) -> None:
    img = Image.open(io.BytesIO(png)).convert("RGB")
    small = img.resize((200, 200))
    colors = small.getcolors(maxcolors=200 * 200)
    assert colors is not None and len(colors) > 20, "screenshot has almost no distinct colours"
    background = max(colors)[1]
    ink = sum(n for n, c in colors if c != background)
    assert ink > 0.02 * 200 * 200, "screenshot is nearly all background"


def test_paste_the_filled_message_lands_on_its_page(base_url: str, browser) -> None:
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    page.goto(base_url + "/")
    page.fill("textarea#q", FILLED)
    page.click("text=Find this error")
    page.wait_for_url(f"**/errors/{DCP}/", timeout=15000)
    assert page.locator("h1").inner_text().startswith("The model's number of query heads per KV head")
    assert page.locator("#source").inner_text().count("Thrown at vllm/config/model.py:23") == 1
    SHOTS.mkdir(parents=True, exist_ok=True)
    png = page.screenshot(path=str(SHOTS / "dcp-page.png"), full_page=True)
    assert_not_blank(png)
    page.close()


def test_a_paste_of_an_older_wording_lands_on_its_successors_page(tmp_path: Path, browser) -> None:
    """The older id has no page in a build of one release: the search box goes to the page of
    the error it became, as `kb search` does."""
    from kb.model import Wording
    from kb.records.merge import build_records
    from kb.site.build import BuildOptions, build_site
    from sitehelpers import fixture_scan

    result = fixture_scan(tmp_path / "tree")
    old = Wording("0ld0000000000c00", "KV heads per DCP rank ({n}) went wrong in an old release", "vllm/old.py", 3,
                  "f", "ValueError", "0.0.1", "0.0.9", DCP, "0.1.0", DCP)
    build_site(result, BuildOptions(tmp_path / "site", jobs=1), attach_set_by(build_records(result), result.config), wordings=(old,))
    with serving(tmp_path / "site") as url:
        page = browser.new_page()
        page.goto(url + "/")
        page.fill("textarea#q", "ValueError: KV heads per DCP rank (3) went wrong in an old release")
        page.click("text=Find this error")
        page.wait_for_url(f"**/errors/{DCP}/", timeout=15000)
        page.close()


def test_a_removed_wording_leads_to_the_live_page_and_no_result_is_a_dead_link(tmp_path: Path, browser) -> None:
    """As `kb explain` answers (tests/test_first_answer.py): the OOM message of a removed V0 file
    lands on the page of the live error raising it; a removed error with no successor is listed as
    plain text, said to have no page, with a working link to the nearest live page. No result is
    an anchor without a page behind it."""
    import urllib.request
    from dataclasses import replace

    from kb.model import Entry
    from kb.records.merge import build_records
    from kb.site.build import BuildOptions, build_site
    from sitehelpers import fixture_scan
    from test_first_answer import EXTRA, GONE, OOM, _site, _wordings

    result = fixture_scan(tmp_path / "tree", EXTRA)
    live = _site(result, "vllm/v1/core/kv.py", "No available")
    records = [replace(r, entry=Entry(r.id, "errors/oom.yaml", "The KV cache gets what is left of the memory budget.",
                                      solutions=("Raise `--gpu-memory-utilization`.",))) if r.id == live else r
               for r in build_records(result)]
    build_site(result, BuildOptions(tmp_path / "site", jobs=1), attach_set_by(records, result.config), wordings=_wordings(result))
    traceback = ('  File "/usr/lib/python3/dist-packages/vllm/worker/worker.py", line 660, in raise_if_cache_size_'
                 f'invalid\nValueError: {OOM}\n')
    with serving(tmp_path / "site") as url:
        _agree(url, browser, [traceback, f"ValueError: {OOM}", "ValueError: Cannot request more than 20 logprobs.",
                              "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens "
                              "that can be stored in KV cache (20016). Try increasing `gpu_memory_utilization` or "
                              "decreasing `max_model_len` when initializing the engine."])
        page = browser.new_page()
        page.goto(url + "/")
        page.fill("textarea#q", traceback)
        page.click("text=Find this error")
        page.wait_for_url(f"**/errors/{live}/", timeout=15000)

        page.goto(url + "/search/")
        page.fill("textarea#q", "prefix noise ValueError: Cannot request more than 20 logprobs. and more noise")
        page.click("button[type=submit]")
        first = page.locator("#results li").first
        first.wait_for(timeout=15000)
        assert first.locator("span.nolink").inner_text().startswith("Cannot request more than")
        assert "raised by vLLM" not in first.inner_text()  # its release range is the note's
        assert "Raised up to vLLM 0.10.2 (from 0.4.3); removed in 0.11.2." in first.inner_text()
        assert "No page on this site: vLLM 0.1.0 does not raise it. The closest current error" in first.inner_text()
        assert page.locator("#results a:not([href])").count() == 0
        hrefs = page.eval_on_selector_all("#results a", "as => as.map(a => a.href)")
        assert hrefs and all(urllib.request.urlopen(h).status == 200 for h in hrefs)
        assert GONE not in "".join(hrefs)

        page.fill("textarea#q", "see: ValueError: " + OOM + " (twice)")  # inside a text: listed, the answer first
        page.click("button[type=submit]")
        page.wait_for_function("document.getElementById('status').textContent.includes('matches')")
        first = page.locator("#results li").first
        assert first.locator("a").first.get_attribute("href").endswith(f"errors/{live}/")
        assert "What it means: The KV cache gets what is left of the memory budget." in first.inner_text()
        assert "First fix: Raise --gpu-memory-utilization." in first.inner_text()  # plain text: no Markdown
        page.close()


def test_search_shows_the_placeholder_values(base_url: str, browser) -> None:
    assert_search_page_works(base_url, browser)


def assert_search_page_works(url: str, browser) -> None:
    """A paste inside other text lists its error with the values read from it (the exact
    message alone would go straight to its page); words are ranked."""
    page = browser.new_page()
    page.goto(url + "/search/")
    page.fill("textarea#q", "prefix noise " + FILLED + " and more noise")
    page.click("button[type=submit]")
    first = page.locator("#results li").first
    first.wait_for(timeout=15000)
    assert "num_q_per_kv = 6" in first.inner_text() and "decode_context_parallel_size = 4" in first.inner_text()
    page.fill("textarea#q", "tensor parallel size")
    page.click("button[type=submit]")
    page.wait_for_function("document.getElementById('status').textContent.includes('ranked by these words')")
    assert "Total number of attention heads" in page.locator("#results").inner_text()
    page.close()


def test_search_works_where_the_host_unpacked_the_indexes(tmp_path: Path, browser) -> None:
    """The indexes are gzipped files; a host that sends them unpacked (Content-Encoding: gzip,
    undone by the browser) is read as well: told by the first bytes, not the name."""
    import gzip

    site, _ = build_fixture(tmp_path)
    for path in sorted((site / "api").rglob("*.json.gz")):  # the match index, the word index's pieces
        path.write_bytes(gzip.decompress(path.read_bytes()))
    with serving(site) as url:
        assert_search_page_works(url, browser)


def test_a_browser_that_cannot_unpack_gzip_is_told_so(base_url: str, browser) -> None:
    page = browser.new_page()
    page.add_init_script("delete window.DecompressionStream")
    page.goto(base_url + "/search/")
    page.wait_for_function("document.getElementById('status').textContent.startsWith('Could not')")
    assert page.locator("#status").inner_text() == \
        "Could not load the search index (this browser cannot unpack gzip: a newer one can)."
    page.close()



@pytest.mark.parametrize("piece", ["head", "bucket"])
def test_a_word_index_that_failed_to_load_is_fetched_again(base_url: str, browser, piece: str) -> None:
    """The word index's head (fetched as the page loads) or the piece a query needs failed to
    load: the page says so, and the next search fetches it again (a piece fetched while the words
    were typed is fetched again by the search)."""
    page = browser.new_page()
    failures = []

    def once(route) -> None:
        if not failures:
            failures.append(route.request.url)
            route.abort()
        else:
            route.continue_()

    page.route("**/api/search-words.json.gz" if piece == "head" else "**/api/search-words/*.json.gz", once)
    page.goto(base_url + "/search/")
    page.wait_for_function("document.getElementById('status').textContent === ''")  # the match index is in
    if piece == "head":
        page.fill("textarea#q", "tensor parallel size")
    else:  # not typed: the search is the first to fetch the query's piece
        page.evaluate("document.getElementById('q').value = 'tensor parallel size'")
    told = []
    for _ in range(2):  # the head may fail before the search starts (then that search fetches it again)
        page.click("button[type=submit]")
        page.wait_for_function("(s => s.startsWith('Could not') || s.includes('ranked by these words'))"
                               "(document.getElementById('status').textContent)")
        if "ranked" in page.locator("#status").inner_text():
            break
        told.append(page.locator("#status").inner_text())
    assert "Total number of attention heads" in page.locator("#results").inner_text() and len(failures) == 1
    assert told == (["Could not load the word index (Failed to fetch)."] if piece == "bucket" else told[:1])
    assert page.evaluate("(q) => window.kbSearch(q, 3)", "tensor parallel size")
    page.close()


WORD_QUERIES = ["tensor parallel size", "tp heads", "dcp", "kv heads divisible", "max model len", "LoRA",
                "quant", "oom memory", "bf16", "attention heads tp", "query heads per kv head", "the a of",
                "--decode-context-parallel-size", "ＴＰ", "zzzz", "evil script", "max_model_len too small",
                "ValueError model.py", "constructor", "try ray key deploy array", "🐛" * 1994 + " tensor parallel size"]


def test_the_index_stems_and_rounds_as_lunr_js_does(base_url: str, browser) -> None:
    """The index is built with kb's stemmer and read by lunr.js's: they agree on every word of
    the fixture's index and on the words lunr.py's own stemmer gets wrong; scores are rounded
    alike (a half goes up)."""
    import random
    import urllib.request

    from kb.search.query import score6
    from kb.search.stem import stem_word

    data = unpacked_json(urllib.request.urlopen(base_url + "/api/search-index.json.gz").read())
    words = sorted({w for title in data["docs"] for w in title[1].lower().split() if w.isalpha()}
                   | {"ray", "key", "try", "deploy", "array", "always", "why", "may", "lay", "by", "eed", "feed",
                      "agreed", "happy", "sky", "enjoy", "flying", "dying", "cry", "syzygy", "ies", "sses", "eeds", "ties",
                      "caresses", "ponies"})
    page = browser.new_page()
    page.goto(base_url + "/search/")
    page.wait_for_function("window.lunr !== undefined")
    js = page.evaluate("(ws) => ws.map((w) => lunr.stemmer(new lunr.Token(w)).toString())", words)
    assert js == [stem_word(w) for w in words]
    rng = random.Random(7)
    xs = [round(rng.uniform(0, 80), 3) * share for share in (1 / 16, 1 / 4, 9 / 16, 1 / 9, 4 / 9) for _ in range(400)]
    assert page.evaluate("(xs) => xs.map((x) => Math.round(x * 1e6) / 1e6)", xs) == [score6(x) for x in xs]
    page.close()


def test_the_search_box_ranks_words_as_kb_search_does(base_url: str, browser) -> None:
    """The same queries through the site's lunr.js and `kb search` (lunr.py) over the same
    index: the same ids, in the same order, with the same scores; and the page lists them so."""
    import urllib.request

    from kb.search.query import SearchIndex

    python = SearchIndex(unpacked_json(urllib.request.urlopen(base_url + "/api/search-index.json.gz").read()))
    page = browser.new_page()
    page.goto(base_url + "/search/")
    page.wait_for_function("window.kbSearch !== undefined")
    for query in WORD_QUERIES:
        site = page.evaluate("(q) => window.kbSearch(q, 10)", query)
        cli = [{"id": h.id, "score": h.score, "title": h.title} for h in python.words(query, 10)]
        assert site == cli, query
    assert any(page.evaluate("(q) => window.kbSearch(q, 10)", q) for q in WORD_QUERIES)
    # the results list of the page, for a query that is no paste, is kb search's order
    page.fill("textarea#q", "kv heads divisible")
    page.click("button[type=submit]")
    page.wait_for_function("document.getElementById('status').textContent.includes('ranked by these words')")
    shown = page.eval_on_selector_all("#results li a", "els => els.map(e => e.getAttribute('href'))")
    expected = [f"../errors/{h.id}/" for h in python.words("kv heads divisible", 20)]
    assert shown == expected
    page.close()


def test_the_word_index_in_pieces_ranks_as_the_whole_one(tmp_path: Path, browser, monkeypatch) -> None:
    """With the word index in many pieces, a query fetches the pieces of its terms only, and the
    page ranks over them as `kb search` over the whole index."""
    import kb.search.shards
    from kb.search.query import SearchIndex

    monkeypatch.setattr(kb.search.shards, "BUCKET_CHARS", 40)
    site, _ = build_fixture(tmp_path)
    pieces = list((site / "api" / "search-words").iterdir())
    assert len(pieces) > 20
    python = SearchIndex(unpacked_json((site / "api" / "search-index.json.gz").read_bytes()))
    with serving(site) as url:
        page = browser.new_page()
        fetched: list[str] = []
        page.on("request", lambda r: fetched.append(r.url) if "/search-words/" in r.url else None)
        page.goto(url + "/search/")
        page.wait_for_function("window.kbSearch !== undefined")
        assert page.evaluate("(q) => window.kbSearch(q, 10)", "tensor parallel size")
        assert 0 < len(fetched) < len(pieces) / 2
        # typed words fetch their pieces as they are typed: the search then fetches none
        before = len(fetched)
        page.fill("textarea#q", "kv heads divisible")
        page.wait_for_load_state("networkidle")
        typed = len(fetched)
        page.click("button[type=submit]")
        page.wait_for_function("document.getElementById('status').textContent.includes('ranked by these words')")
        assert typed > before and len(fetched) == typed
        for query in WORD_QUERIES:
            site_hits = page.evaluate("(q) => window.kbSearch(q, 10)", query)
            assert site_hits == [{"id": h.id, "score": h.score, "title": h.title} for h in python.words(query, 10)], query
        page.close()


def test_enter_searches_and_shift_enter_starts_a_line(base_url: str, browser) -> None:
    page = browser.new_page()
    page.goto(base_url + "/search/")
    page.wait_for_function("document.getElementById('status').textContent === ''")
    page.click("textarea#q")
    page.keyboard.type("tensor parallel")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("size")
    assert page.input_value("textarea#q") == "tensor parallel\nsize" and page.locator("#results li").count() == 0
    page.keyboard.press("Enter")
    page.wait_for_function("document.getElementById('status').textContent.includes('ranked by these words')",
                           timeout=10000)
    assert page.input_value("textarea#q") == "tensor parallel\nsize"  # Enter added no line
    assert "Total number of attention heads" in page.locator("#results").inner_text()
    assert page.url.endswith("?q=tensor+parallel%0Asize")
    page.close()


def test_a_result_says_what_it_means_in_plain_text_cut_at_a_sentence(tmp_path: Path, browser) -> None:
    """The list renders no Markdown: the meaning's preview is its plain text, cut after a whole
    sentence with "…" (kb/entries/plain.py), with no backtick or quote left open; the first fix is
    plain text too (code, emphasis and links are their text)."""
    from dataclasses import replace

    from kb.model import Entry
    from kb.records.merge import build_records
    from kb.site.build import BuildOptions, build_site
    from sitehelpers import fixture_scan
    from test_preview import MEANING

    result = fixture_scan(tmp_path / "tree")
    fix = "Remove the cache: `rm -rf ~/.cache/vllm/torch_compile_cache` (**once**, see [the docs](https://docs.vllm.ai/))."
    records = [replace(r, entry=Entry(r.id, "errors/dcp.yaml", MEANING, solutions=(fix,)))
               if r.id == DCP else r for r in build_records(result)]
    build_site(result, BuildOptions(tmp_path / "site", jobs=1), attach_set_by(records, result.config))
    with serving(tmp_path / "site") as url:
        for width in (1100, 390):
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.goto(url + "/search/")
            page.fill("textarea#q", "prefix noise " + FILLED + " and more noise")
            page.click("button[type=submit]")
            meaning = page.locator("#results li .meaning").first
            meaning.wait_for(timeout=15000)
            assert meaning.inner_text() == (
                "What it means: With the default compilation mode (VLLM_COMPILE) vLLM compiles the model's graph "
                "pieces with torch.compile/Inductor on first start and stores the results under "
                "$VLLM_CACHE_ROOT/torch_compile_cache (~/.cache/vllm/torch_compile_cache by default), so later "
                "starts can reuse them. …")
            assert page.locator("#results li .fix").first.inner_text() == (
                "First fix: Remove the cache: rm -rf ~/.cache/vllm/torch_compile_cache (once, see the docs).")
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            page.close()


def test_dark_theme_and_phone_width(base_url: str, browser) -> None:
    page = browser.new_page(viewport={"width": 390, "height": 844}, color_scheme="dark")
    page.goto(f"{base_url}/errors/{DCP}/")
    bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert bg == "rgb(13, 17, 23)"
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, "the page scrolls sideways on a phone"
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert_not_blank(page.screenshot(path=str(SHOTS / "dcp-phone-dark.png"), full_page=True))
    page.close()


@pytest.fixture(scope="module")
def curated_url(tmp_path_factory: pytest.TempPathFactory):
    from entryhelpers import DCP_ENTRY, DCP_MAX, DCP_MAX_ENTRY, DCP_MAX_FILE, write_entries
    from kb.cli import main

    tmp = tmp_path_factory.mktemp("curated")
    from fixture_tree import tree_files, write_tree

    tree = write_tree(tmp / "tree", tree_files("0.1.0", broken=False) | {DCP_MAX_FILE: DCP_MAX})
    entries = write_entries(tmp / "errors", {"dcp.yaml": DCP_ENTRY, "max.yaml": DCP_MAX_ENTRY})
    assert main(["build", "--source", str(tree), "--errors", str(entries), "-o", str(tmp / "site"), "--quiet"]) == 0
    CURATED[:] = [tree, entries]
    with serving(tmp / "site") as url:
        yield url


CURATED: list[Path] = []  # the tree and the entries the curated site is built from


def test_the_form_lists_the_valid_values_kb_check_lists(curated_url: str, browser, tmp_path: Path) -> None:
    import json

    from kb.checks.report import outcome_json
    from kb.jobs import check_launch
    from kb.scan.source import SourceSpec

    tree, entries = CURATED
    page = browser.new_page()
    page.goto(f"{curated_url}/errors/{DCP}/")
    valid = page.locator("#check .valid")
    for heads, kv, tp, dcp in ((48, 8, 16, 4), (48, 8, 32, 4), (48, 12, 24, 3), (64, 8, 64, 3)):
        for name, value in (("num_attention_heads", heads), ("num_key_value_heads", kv), ("kv_lora_rank", 0),
                            ("tensor_parallel_size", tp), ("decode_context_parallel_size", dcp)):
            page.fill(f"input[name={name}]", str(value))
        config = tmp_path / "config.json"
        config.write_text(json.dumps({"num_attention_heads": heads, "num_key_value_heads": kv}))
        out = json.loads(outcome_json(check_launch(SourceSpec(source_dir=str(tree)), [
            "vllm", "serve", "m", "-tp", str(tp), "-dcp", str(dcp)], config, errors=entries, use_cache=False)))
        mine = next(p for p in out["predicted"] if p["id"] == DCP)
        values = mine["validValues"]["--decode-context-parallel-size"]
        assert valid.inner_text() == ("Valid --decode-context-parallel-size here (the rest unchanged, every check of "
                                      "it passes): " + ", ".join(map(str, values))), (heads, kv, tp, dcp)
    assert values == [1, 2, 4, 8]  # 64/8 heads on TP 64: the query heads per KV head (8) and TP // KV heads (8)
    page.fill("input[name=decode_context_parallel_size]", "2")
    assert valid.is_hidden()  # no error: no list
    page.close()


def test_checker_verdict_follows_typed_values(curated_url: str, browser) -> None:
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    page.goto(f"{curated_url}/errors/{DCP}/")
    verdict = page.locator("#check .verdict")
    verdict.wait_for(timeout=10000)
    assert "raises this error" in verdict.inner_text()  # prefilled with a raising case: 48/8, DCP 4
    page.fill("input[name=decode_context_parallel_size]", "2")
    assert "not raised" in verdict.inner_text()
    page.fill("input[name=decode_context_parallel_size]", "3")
    assert "not raised" in verdict.inner_text()  # 6 % 3 == 0: this error is not the one that fires
    page.fill("input[name=num_key_value_heads]", "12")
    assert "raises this error" in verdict.inner_text()  # 48 // 12 = 4 query heads per KV head: 4 % 3 != 0
    page.fill("input[name=num_key_value_heads]", "")
    assert "Give a value for num_key_value_heads" in verdict.inner_text()
    page.fill("input[name=num_key_value_heads]", "8")
    page.fill("input[name=decode_context_parallel_size]", "0")  # as kb check: below the vocabulary's minimum
    assert verdict.inner_text() == "decode_context_parallel_size must be at least 1, got 0 (kb check refuses it too)."
    page.fill("input[name=decode_context_parallel_size]", "4")
    assert "raises this error" in verdict.inner_text()
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert_not_blank(page.locator("#check").screenshot(path=str(SHOTS / "checker.png")))
    page.close()


def test_page_and_python_evaluators_agree(curated_url: str, browser) -> None:
    from kb.checks.evaluate import evaluate, to_tree

    page = browser.new_page()
    page.goto(f"{curated_url}/errors/{DCP}/")
    page.wait_for_function("window.kbCheck !== undefined")
    cases = [
        ("(a // b) % c != 0", {"a": 48, "b": 8, "c": 4}), ("-7 // 2", {}), ("-7 % 3", {}), ("7 % -3", {}),
        ("1 < x <= 3", {"x": 3}), ("q in ('awq', 'gptq')", {"q": "fp8"}), ("v == None", {"v": None}),
        ("max(a, b) - min(a, b) + abs(-2)", {"a": 1, "b": 5}), ("a and b or c", {"a": 0, "b": 1, "c": 9}),
        ("True == 1 and x != False", {"x": True}), ("2 ** 10 // 3", {}), ("not (a > 1 and b)", {"a": 2, "b": 0}),
        ("int(7.9) + float(2)", {}), ("len('abc') == 3 and str(None) == 'None'", {}),
    ]
    for expr, env in cases:
        got = page.evaluate("([t, env]) => window.kbCheck.evaluate(t, env)", [to_tree(expr), env])
        assert got == evaluate(expr, env), expr
    page.close()


@pytest.fixture(scope="module")
def lookup_url(tmp_path_factory: pytest.TempPathFactory):
    with serving(build_lookup_fixture(tmp_path_factory.mktemp("lookup"))) as url:
        yield url


def _agree(url: str, browser, texts: list[str]) -> None:
    import urllib.request

    from kb.explain.match import Matcher, explain
    from kb.explain.output import answer_note, wording_note

    matcher = Matcher(unpacked_json(urllib.request.urlopen(url + "/api/match-index.json.gz").read()))
    page = browser.new_page()
    page.goto(url + "/search/")
    page.wait_for_function("window.kbExplain !== undefined && document.getElementById('status').textContent === ''")
    for text in texts:
        site = page.evaluate("(t) => window.kbExplain(t)", text)
        ex = explain(text, matcher)
        cli = {"found": [{"id": f.best.id, "kind": f.best.kind, "score": f.best.score,
                          "values": [list(v) for v in f.best.values],
                          "answer": f.answer.id if f.answer else None, "via": f.answer.via if f.answer else None,
                          "closest": [f.closest.id, f.closest.score] if f.closest else None,
                          "note": (answer_note(f) if f.answer else wording_note(f.best.entry)) or ""}
                         for f in ex.found],
               "suggestions": [{"id": s.id, "kind": s.kind, "score": s.score, "values": []} for s in ex.suggestions]}
        assert site == cli, text
    page.close()


def test_ranking_and_edge_values_agree(lookup_url: str, browser) -> None:
    """Release clues, older wording, cut-off messages and placeholders at the ends: the same
    answers in the browser as in `kb explain` (whose answers tests/test_explain.py checks)."""
    _agree(lookup_url, browser, LOOKUP_PASTES + [p.lower() for p in LOOKUP_PASTES])


def test_site_lookup_and_kb_explain_agree(base_url: str, browser) -> None:
    """The site's paste box and `kb explain` read the same index and must give the same answers."""
    _agree(base_url, browser, [
        FILLED, "prefix " + FILLED.removeprefix("ValueError: ") + " suffix",
        "ERROR 11-30 12:00:00 [core.py:123] \x1b[31m" + FILLED + "\x1b[0m\r\n",
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n  Value error, "
        "max_model_len of 1 is too small [type=value_error, input_value=1]",
        "ValueError: The model's number of query heads per KV head (6) must be divisible by `--decode-cont",
        "the number of query heads per KV group is odd", "nothing at all",
        "ValueError: <script>alert('x')</script> bad <b> & more",
        FILLED.lower(), "[Bug]: " + FILLED[:-1], "RuntimeError: Worker failed with error '" + FILLED + "', see above",
        "I got `" + FILLED + "` with TP 16",
    ])


KV_PLANNING = '''
def format_gib(b):
    return str(round(b / (1 << 30), 2))


def check_enough(available_memory, max_model_len, needed_memory, estimated):
    if available_memory <= 0:
        raise ValueError(
            "No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine."
        )
    if needed_memory > available_memory:
        raise ValueError(
            f"To serve at least one request with the model's max seq len "
            f"({max_model_len}), ({format_gib(needed_memory)} GiB KV cache is "
            "needed, which is larger than the available KV cache memory "
            f"({format_gib(available_memory)} GiB). {estimated}Try increasing "
            "`gpu_memory_utilization` or decreasing `max_model_len`."
        )
'''


@pytest.fixture(scope="module")
def memory_url(tmp_path_factory: pytest.TempPathFactory):
    from fixture_tree import tree_files, write_tree
    from kb.cli import main

    tmp = tmp_path_factory.mktemp("memory")
    tree = write_tree(tmp / "tree", tree_files("0.1.0", broken=False) | {"vllm/v1/core/kv_cache_planning.py": KV_PLANNING})
    assert main(["build", "--source", str(tree), "-o", str(tmp / "site"), "--quiet"]) == 0
    with serving(tmp / "site") as url:
        yield url, tree


def test_the_memory_pages_calculator_gives_kb_fits_figures(memory_url, browser) -> None:
    """The "Will it fit?" form (static/fit.js) and kb fit's arithmetic (kb/fit/memory.py) on the
    same launches: the same tokens, the same longest length, the same error in vLLM's words."""
    import json

    from kb.checks.computed import Hardware, batch_defaults
    from kb.fit.launch import fit_error_key
    from kb.fit.memory import GIB, FitInput, compute
    from kb.fit.shape import shape_of
    from kb.hardware import gpu
    from kb.jobs import scan_release
    from kb.scan.source import SourceSpec

    url, tree = memory_url
    scan = scan_release(SourceSpec(source_dir=str(tree)), use_cache=False)
    ident = next(s.id for s in scan.sites if s.template.startswith("To serve at least one request"))
    templates = {fit_error_key(s.template): s.template for s in scan.sites if fit_error_key(s.template)}
    page = browser.new_page(viewport={"width": 1100, "height": 1400})
    page.goto(f"{url}/errors/{ident}/")
    out = page.locator("#fit .fit-out")
    out.locator("dl").wait_for(timeout=10000)
    llama = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
             "num_key_value_heads": 8, "num_hidden_layers": 32, "intermediate_size": 14336, "vocab_size": 128256,
             "torch_dtype": "bfloat16", "max_position_embeddings": 8192}
    reference = {**llama, "hidden_size": 6144, "num_attention_heads": 48, "num_hidden_layers": 64, "head_dim": 128,
                 "intermediate_size": 24576, "max_position_embeddings": 131072}
    gemma2 = {**llama, "model_type": "gemma2", "num_hidden_layers": 46, "num_key_value_heads": 16, "head_dim": 128,
              "hidden_size": 4608, "intermediate_size": 36864, "vocab_size": 256000, "sliding_window": 4096}
    for config, card, length, tp in ((reference, "h100", 131072, 1), (llama, "h100", 8192, 1), (llama, "l4", 8192, 1),
                                     (gemma2, "a100-80gb", 8192, 2), (reference, "b200", 65536, 4),
                                     (reference, "l4", 8192, 1)):  # the weights do not load: that failure only
        g = gpu(card)
        assert g is not None
        page.fill("#fit textarea[name=config]", json.dumps(config))
        page.select_option("#fit select[name=gpu]", card)
        page.fill("#fit input[name=max_model_len]", str(length))
        page.fill("#fit input[name=tensor_parallel_size]", str(tp))
        # vLLM's batch defaults for the GPU, as kb fit takes them (kb/checks/computed.py)
        tokens, seqs = batch_defaults(lambda dest: None, {"max_model_len": length, "enable_chunked_prefill": True},
                                      config, Hardware(g.memory_gib * GIB, g.name, g.capability))
        fit = compute(FitInput(shape_of(config), g.memory_gib * GIB, True, tp=tp, max_model_len=length,
                               max_num_batched_tokens=tokens, max_num_seqs=seqs, capability=g.capability))
        shown = out.locator("dd[data-key='KV cache tokens']").inner_text()
        assert shown == str(int(fit.kv_cache_tokens.value)), (card, config["num_hidden_layers"], shown, fit.kv_cache_tokens)
        assert out.locator("dd[data-key='Longest max_model_len that fits']").inner_text() == str(int(
            fit.max_model_len_fits.value))
        verdict = out.locator(".fit-verdict").inner_text()
        first = fit.errors[0] if fit.errors else None
        template = templates.get(first.key) if first is not None else None
        assert verdict == ("Fits: vLLM starts with this KV cache." if first is None else
                           ("vLLM raises: " if template else "kb predicts: ") + first.text(template)[0]), (card, verdict)
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert_not_blank(page.locator("#fit").screenshot(path=str(SHOTS / "fit-form.png")))
    page.close()


def test_a_slug_url_on_a_static_host_lands_on_its_page(tmp_path: Path, browser) -> None:
    site, _ = build_fixture(tmp_path)
    # 404.html links the root absolutely, as hosts serve it at any depth; the sub-path is the script's to find
    with pages_like_host(site) as url:
        page = browser.new_page()
        page.goto(url + "/errors/the-model-s-number-of-query-heads-per-kv-head/")
        page.wait_for_url(f"**/kb/errors/{DCP}/", timeout=15000)
        assert page.locator("h1").inner_text().startswith("The model's number of query heads per KV head")
        page.goto(url + "/errors/no-such-slug/")
        page.wait_for_function("document.getElementById('missing').textContent.includes('no-such-slug')", timeout=15000)
        assert "/errors/no-such-slug/" in page.url
        # a path naming another host before /errors/ is not a root to fetch from or go to
        for path in ["//127.0.0.1:9/errors/x-y/", "/\\127.0.0.1:9/errors/x-y/"]:
            requests: list[str] = []
            page.on("request", lambda r, seen=requests: seen.append(r.url))
            page.goto(url.rsplit("/kb", 1)[0] + path)
            page.wait_for_timeout(300)
            assert not any(urlsplit(u).port == 9 for u in requests), requests  # nothing went to the other host
            assert page.url.startswith(url.rsplit("/kb", 1)[0]), page.url
        page.close()
