"""Real-browser tests: Debian's chromium driven by Playwright (never `playwright install`)."""

from __future__ import annotations

import io
import os
import shutil
import threading
from pathlib import Path

import pytest

from kb.serve import make_server
from sitehelpers import build_fixture

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


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory):
    site, _ = build_fixture(tmp_path_factory.mktemp("browser"))
    srv = make_server(site, 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


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


def test_search_shows_the_placeholder_values(base_url: str, browser) -> None:
    page = browser.new_page()
    page.goto(base_url + "/search/")
    page.fill("textarea#q", "prefix noise " + FILLED + " and more noise")
    page.click("button[type=submit]")
    first = page.locator("#results li").first
    first.wait_for(timeout=15000)
    assert "num_q_per_kv = 6" in first.inner_text() and "decode_context_parallel_size = 4" in first.inner_text()
    page.fill("textarea#q", "tensor parallel size")
    page.click("button[type=submit]")
    page.wait_for_function("document.getElementById('status').textContent.includes('mention these words')")
    assert "Total number of attention heads" in page.locator("#results").inner_text()
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
