"""Real-browser checks of the search box's first answer (#32): a few words from the header's box
are listed before the match index is in, and the lookup then gives the page the match-index-first
order gave; the home page's paste box sends on Enter as the header's box does."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from test_browser import browser, serving  # noqa: F401  (browser: the fixture)

MAX_LEN = "ef0ccffdba43ce48"  # "max_model_len of {self.max_model_len} is too small" in the fixture tree
FINAL = "(s => s !== '' && !s.endsWith('…'))(document.getElementById('status').textContent)"


@pytest.fixture(scope="module")
def site_url(tmp_path_factory: pytest.TempPathFactory):
    from sitehelpers import build_fixture

    site, _ = build_fixture(tmp_path_factory.mktemp("search-first"))
    with serving(site) as url:
        yield url


def _holding_the_match_index(page) -> list:
    """Requests for the match index, held until the test lets them go."""
    held: list = []
    page.route("**/api/match-index.json.gz", lambda route: held.append(route))
    return held


def _answered_on_a_loaded_page(browser, url: str, text: str) -> tuple[str, str]:  # noqa: F811
    """The results list and status of `text` searched once the match index is in (the order before #32)."""
    page = browser.new_page()
    page.goto(url + "/search/")
    page.wait_for_function("document.getElementById('status').textContent === ''")
    page.fill("textarea#q", text)
    page.click("button[type=submit]")
    page.wait_for_function(FINAL)
    out = (page.inner_html("#results"), page.inner_text("#status"))
    page.close()
    return out


@pytest.mark.parametrize("width", [1100, 390])
def test_words_from_the_header_are_listed_before_the_match_index_is_in(site_url: str, browser,  # noqa: F811
                                                                      width: int) -> None:
    """The match index is held back: the words' results are listed all the same, said to wait for
    the lookup; let go, the lookup finds no message and the list stays, as it reads when the index
    came first."""
    query = "tensor parallel size"
    page = browser.new_page(viewport={"width": width, "height": 900})
    held = _holding_the_match_index(page)
    page.goto(f"{site_url}/errors/{MAX_LEN}/")
    page.fill("header input[name=q]", query)
    page.press("header input[name=q]", "Enter")
    page.locator("#results li").first.wait_for(timeout=15000)
    assert held  # the match index is still on its way
    assert page.inner_text("#status") == ("Errors ranked by these words, best first. Still checking whether "
                                          "your text is a known error message…")
    early = page.inner_html("#results")
    assert "Total number of attention heads" in page.locator("#results li").first.inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    for route in held:
        route.continue_()
    page.wait_for_function(FINAL)
    final = (page.inner_html("#results"), page.inner_text("#status"))
    assert final == _answered_on_a_loaded_page(browser, site_url, query)
    assert final[0] == early  # the early list was the final one: class, file and line included
    page.close()


def test_a_known_message_of_a_few_words_takes_the_words_place(site_url: str, browser) -> None:  # noqa: F811
    """A few words that are a message: listed as words while the index loads, then the lookup
    answers as before: the exact message opens its page, one inside a text is listed alone. A
    message pasted with its exception class waits for the lookup, as before."""
    for text, lands in (("max_model_len of 1 is too small", True), ("got max_model_len of 1 is too small here", False)):
        page = browser.new_page()
        held = _holding_the_match_index(page)
        page.goto(f"{site_url}/search/?{urlencode({'q': text})}", wait_until="domcontentloaded")
        page.wait_for_function("document.getElementById('status').textContent.includes('Still checking')",
                               timeout=15000)
        assert page.locator("#results li").count() > 0
        for route in held:
            route.continue_()
        if lands:
            page.wait_for_url(f"**/errors/{MAX_LEN}/", timeout=15000)
        else:
            page.wait_for_function(FINAL)
            assert page.inner_text("#status") == "Your text matches 1 known error."
            assert (page.inner_html("#results"), page.inner_text("#status")) == \
                _answered_on_a_loaded_page(browser, site_url, text)
            assert page.locator("#results li a").first.get_attribute("href") == f"../errors/{MAX_LEN}/"
        page.close()
    # a pasted message ("ValueError: ...") goes to the lookup first, as before: no words meanwhile
    page = browser.new_page()
    held = _holding_the_match_index(page)
    page.goto(f"{site_url}/search/?{urlencode({'q': 'ValueError: max_model_len of 1 is too small'})}")
    page.wait_for_timeout(1000)  # time enough to list words, were they listed
    assert page.locator("#results li").count() == 0 and page.inner_text("#status") == "Loading the index…"
    for route in held:
        route.continue_()
    page.wait_for_url(f"**/errors/{MAX_LEN}/", timeout=15000)
    page.close()


@pytest.mark.parametrize("width", [1100, 390])
def test_the_home_paste_box_sends_on_enter_and_starts_a_line_on_shift_enter(site_url: str, browser,  # noqa: F811
                                                                            width: int) -> None:
    page = browser.new_page(viewport={"width": width, "height": 900})
    scripts: list[str] = []
    page.on("request", lambda r: scripts.append(r.url.rsplit("/", 1)[-1]) if r.resource_type == "script" else None)
    page.goto(site_url + "/")
    assert sorted(scripts) == ["enter.js", "theme.js"]  # nothing heavy: no index, no lunr
    page.click("textarea#q")
    page.keyboard.type("tensor parallel")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("size")
    assert page.input_value("textarea#q") == "tensor parallel\nsize" and page.url == site_url + "/"
    page.keyboard.press("Enter")
    page.wait_for_url("**/search/?q=tensor+parallel%0D%0Asize", timeout=15000)  # a form sends a new line so
    page.wait_for_function(FINAL)
    assert page.input_value("textarea#q") == "tensor parallel\nsize"  # Enter added no line
    assert "Total number of attention heads" in page.locator("#results").inner_text()
    page.close()


def test_words_stay_listed_when_the_match_index_fails_to_load(site_url: str, browser) -> None:  # noqa: F811
    """The words are listed and the status says the lookup could not run: it never waits on."""
    page = browser.new_page()
    page.route("**/api/match-index.json.gz", lambda route: route.abort())
    page.goto(f"{site_url}/search/?q=tensor+parallel+size")
    page.wait_for_function("document.getElementById('status').textContent.includes('Could not')", timeout=15000)
    page.locator("#results li").first.wait_for(timeout=15000)
    assert page.inner_text("#status") == ("Errors ranked by these words, best first. "
                                          "Could not load the search index (Failed to fetch).")
    assert "Total number of attention heads" in page.locator("#results li").first.inner_text()
    page.close()


def test_a_result_title_reads_as_on_the_error_page(site_url: str, browser) -> None:  # noqa: F811
    """A result's title marks its placeholders and quotes as the error page's heading does (the
    script builds nodes as kb/site/render.py's title_html writes them)."""
    page = browser.new_page()
    page.goto(f"{site_url}/search/?{urlencode({'q': 'tensor parallel size'})}")
    page.wait_for_function(FINAL)
    link = page.locator("#results li a").first
    assert link.locator("var.ph").first.inner_text() == "{total_num_attention_heads}"
    listed = link.inner_html()
    link.click()
    page.wait_for_load_state()
    assert page.inner_html("h1") == listed
    page.close()
