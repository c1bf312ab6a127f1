"""Real-browser checks of a newcomer's first look (#32), at a desktop's and a phone's width in both
themes: an example fix's commands fit their box, wrapped between arguments and copied as written,
with the changed flag marked; the home page is short and leads with the most reported errors."""

from __future__ import annotations

import pytest

from entryhelpers import DCP_ENTRY, DCP_ID, DCP_MAX, DCP_MAX_ENTRY, DCP_MAX_FILE, DCP_MAX_ID, write_entries
from test_browser import SHOTS, assert_not_blank, browser, serving  # noqa: F401  (browser: the fixture)
from test_home import DCP_QUOTE, MAX_QUOTE, reports_file

MODEL = "some-organisation/a-deliberately-long-model-name-that-does-not-fit-on-one-line-Instruct-2507-FP8"
BEFORE = f"vllm serve {MODEL} --tensor-parallel-size 16 --decode-context-parallel-size 4"
AFTER = f"vllm serve {MODEL} --tensor-parallel-size 16 --decode-context-parallel-size 2"
SIZES = [(1280, "light"), (1280, "dark"), (390, "light"), (390, "dark")]


@pytest.fixture(scope="module")
def site_url(tmp_path_factory: pytest.TempPathFactory):
    from fixture_tree import tree_files, write_tree
    from kb.cli import main

    tmp = tmp_path_factory.mktemp("pages")
    tree = write_tree(tmp / "tree", tree_files("0.1.0", broken=False) | {DCP_MAX_FILE: DCP_MAX})
    entry = DCP_ENTRY.replace("vllm serve org/m", f"vllm serve {MODEL}")
    assert BEFORE in entry and AFTER in entry
    entries = write_entries(tmp / "errors", {"dcp.yaml": entry, "max.yaml": DCP_MAX_ENTRY})
    # "The model's ..." is reported twice, "`--decode-context-parallel-size` ..." once: by title it would come last
    write_entries(entries / "reports", {"r.yaml": reports_file({DCP_ID: (2, DCP_QUOTE), DCP_MAX_ID: (1, MAX_QUOTE)})})
    assert main(["build", "--source", str(tree), "--errors", str(entries), "-o", str(tmp / "site"), "--quiet"]) == 0
    with serving(tmp / "site") as url:
        yield url


@pytest.mark.parametrize("width, scheme", SIZES)
def test_the_example_fix_fits_its_box_and_marks_the_changed_flag(site_url: str, browser, width: int,  # noqa: F811
                                                                  scheme: str) -> None:
    page = browser.new_page(viewport={"width": width, "height": 900}, color_scheme=scheme)
    page.goto(f"{site_url}/errors/{DCP_ID}/")
    boxes = page.locator("#example-fix pre")
    assert boxes.count() == 2
    for i, command in enumerate((BEFORE, AFTER)):
        box = boxes.nth(i)
        sizes = box.evaluate("e => [e.scrollWidth, e.clientWidth, e.getClientRects()[0].height]")
        assert sizes[0] <= sizes[1], f"the command is cut at the right edge at {width} px: {sizes}"
        assert box.inner_text().strip() == command  # wrapped on screen, copied as one command
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    marked = page.eval_on_selector_all("#example-fix .chg", "els => els.map(e => [e.tagName, e.innerText, "
                                                            "getComputedStyle(e).textDecorationLine])")
    assert marked == [["DEL", "--decode-context-parallel-size 4", "line-through"],
                      ["INS", "--decode-context-parallel-size 2", "underline"]]  # not by colour alone
    assert page.locator("#example-fix .changes").inner_text() == \
        "Changed: --decode-context-parallel-size 4 → --decode-context-parallel-size 2."
    # a line breaks between arguments: an argument takes more than one line only when longer than a line
    args = boxes.nth(0).evaluate("""pre => { const w = pre.clientWidth; return [...pre.querySelectorAll('.a')].map(
        e => [e.innerText, e.getBoundingClientRect().height, e.getBoundingClientRect().width / w]) }""")
    line = args[0][1]
    assert [a[0] for a in args] == ["vllm", "serve", MODEL, "--tensor-parallel-size 16",
                                    "--decode-context-parallel-size 4"]
    for text, height, share in args:
        assert height < 1.5 * line or share > 0.8, (text, height, share)
    assert args[3][1] < 1.5 * line and args[4][1] < 1.5 * line  # each flag with its value on one line
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert_not_blank(page.locator("#example-fix").screenshot(path=str(SHOTS / f"example-fix-{width}-{scheme}.png")))
    page.close()


@pytest.mark.parametrize("width, scheme", SIZES)
def test_the_home_page_is_short_and_leads_with_the_most_reported_errors(site_url: str, browser, width: int,  # noqa: F811
                                                                        scheme: str) -> None:
    page = browser.new_page(viewport={"width": width, "height": 900}, color_scheme=scheme)
    page.goto(f"{site_url}/")
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height < (3000 if width > 1000 else 5000), height
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.locator("textarea#q").is_visible()
    box = page.locator("textarea#q").bounding_box()
    assert box is not None and box["y"] < 400  # the paste box is what a visitor sees first
    order = page.eval_on_selector_all("ol.top a.title", "els => els.map(e => e.getAttribute('href'))")
    assert order == [f"errors/{DCP_ID}/", f"errors/{DCP_MAX_ID}/"]
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert_not_blank(page.screenshot(path=str(SHOTS / f"home-{width}-{scheme}.png"), full_page=True))
    page.close()


def test_the_full_curated_list_is_one_click_away(site_url: str, browser) -> None:  # noqa: F811
    page = browser.new_page()
    page.goto(f"{site_url}/")
    page.click("text=All 2 curated errors")
    page.wait_for_url("**/curated/")
    assert page.eval_on_selector_all("main ul.errors a", "els => els.length") == 2
    page.close()
