"""The site's search in a real browser: how long from a query to its first result, on loopback.

A built site is served by `kb serve`'s server (in a subprocess, 127.0.0.1) and driven with Debian's
chromium through Playwright, every measure in a fresh browser context (an empty HTTP cache: a
visitor's first search). Medians over the queries of each case:

- word, typed on /search/: the page has loaded, the query is typed (50 ms a key, a fast typist),
  then submitted; from the submit to the first result;
- word, from the header: on an error page, the query is put in the header's box and Enter pressed;
  from Enter to the first result of /search/ (the page, its scripts and indexes load in between:
  the words are listed before the match index is in), and to the lookup's answer (the final list);
- paste, from the header: the same with a real error message (tests/data/real_pastes.yaml), to the
  error's page (or the first result, for a message listed rather than answered);
- paste on /search/: pasted a second after the page loaded, then submitted.

Each time ends when the page itself sees the result attached (a MutationObserver, on the page's
clock): Playwright's own wait is told late while the page's one thread unpacks the match index,
though the result is painted by then. The floor, measured in the same run: a fresh context opening
/about/ (a page without search) to its `load` event; each case is also printed as a ratio of it.

    python bench/site_search.py --site DIR [--queries N] [--results FILE]

`--results FILE` writes, for every labelled query (tests/data/search_queries*.yaml), the links the
results list shows once the lookup has answered, in order, each query landing on /search/?q=... as
the header's box sends it (compare two builds' files to see the ranking unchanged).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import yaml

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
SERVER = """
import sys
from pathlib import Path
from kb.site.serve import make_server
srv = make_server(Path(sys.argv[1]), 0)
print(srv.server_address[1], flush=True)
srv.serve_forever()
"""
DATA = ROOT / "tests" / "data"
QUERY_SETS = ("search_queries.yaml", "search_queries_typed.yaml", "search_queries_heldout.yaml")
FIRST = "#results li"
HEADER = "header input[name=q]"
KEY_DELAY_MS = 50
# the lookup has answered: the page went to an error's page, or the status is final (not "Loading…",
# nor the words listed while the match index loads, "… Still checking …")
ANSWERED = ("() => !location.pathname.endsWith('/search/') || "
            "(s => s !== '' && !s.endsWith('…'))(document.getElementById('status').textContent)")


def word_queries(n: int) -> list[str]:
    """`n` queries spread over the typed and the real labelled sets (every k-th: no choice by hand)."""
    out: list[str] = []
    for name in QUERY_SETS[:2]:
        qs = [q["query"] for q in yaml.safe_load((DATA / name).read_text(encoding="utf-8"))["queries"]]
        step = max(1, len(qs) // max(1, n // 2))
        out += qs[::step][: n // 2]
    return out


def pastes(n: int) -> list[str]:
    """The last line of `n` real pastes holding a vLLM error: the message a user copies."""
    out = []
    for p in yaml.safe_load((DATA / "real_pastes.yaml").read_text(encoding="utf-8")):
        if p.get("expect") == "none":
            continue
        lines = [ln for ln in p["paste"].splitlines() if "Error:" in ln]
        if lines:
            out.append(lines[-1].strip())
    step = max(1, len(out) // max(1, n))
    return out[::step][:n]


# Installed in every page of a measure: when (epoch ms, the page's clock) a result, an error page's
# source or the lookup's answer first appeared.
SEEN = """(() => {
  const seen = window.__kbSeen = {};
  const at = () => performance.timeOrigin + performance.now();
  new MutationObserver(() => {
    for (const s of ["#results li", "#source"]) if (!(s in seen) && document.querySelector(s)) seen[s] = at();
    const status = document.getElementById("status");
    if (!("answered" in seen) && status && (t => t !== "" && !t.endsWith("…"))(status.textContent)) seen.answered = at();
  }).observe(document, {childList: true, subtree: true, characterData: true});
})();"""


def timed(page: Any, act: str, target: str, selector: str, then: str | None = None) -> tuple[float, float | None]:
    """From `act` (click `target`, or press Enter in it) to the first `selector` (comma-separated)
    in the page, and to `then` if given (a key of SEEN's record), in seconds."""
    start = time.time()
    page.click(target) if act == "click" else page.press(target, "Enter")
    page.wait_for_selector(selector, state="attached", timeout=30000)
    told = time.time() - start  # as Playwright is told: late while the page's thread is busy
    if then:
        page.wait_for_function(ANSWERED, timeout=30000)
    seen = page.evaluate("() => window.__kbSeen") or {}
    at = [seen[s.strip()] for s in selector.split(",") if s.strip() in seen]
    first = min(at) / 1000 - start if at else told  # none: the page it was seen in is gone (a message's page opened)
    return first, (seen[then] / 1000 - start if then and then in seen else None)


def measure(browser: Any, base: str, error_page: str, words: list[str], texts: list[str]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"floor: /about/ loads": [], "word, typed on /search/": [],
                                   "word, from the header": [], "word, header, answered": [],
                                   "paste, from the header": [], "paste on /search/": []}

    def fresh() -> tuple[Any, Any]:
        ctx = browser.new_context(viewport={"width": 1100, "height": 900})
        ctx.add_init_script(SEEN)
        return ctx, ctx.new_page()

    for n in range(max(len(words), len(texts))):
        ctx, page = fresh()
        start = time.perf_counter()
        page.goto(base + "/about/", wait_until="load")
        out["floor: /about/ loads"].append(time.perf_counter() - start)
        ctx.close()
        if n < len(words):
            q = words[n]
            ctx, page = fresh()
            page.goto(base + "/search/", wait_until="load")
            page.locator("#q").press_sequentially(q, delay=KEY_DELAY_MS)
            out["word, typed on /search/"].append(timed(page, "click", "#search-form button", FIRST)[0])
            ctx.close()
            ctx, page = fresh()
            page.goto(base + error_page, wait_until="load")
            page.fill(HEADER, q)
            first, answered = timed(page, "press", HEADER, FIRST, "answered")
            out["word, from the header"].append(first)
            if answered is not None:  # None: the words were a message, whose page opened
                out["word, header, answered"].append(answered)
            ctx.close()
        if n < len(texts):
            t = texts[n]
            ctx, page = fresh()
            page.goto(base + error_page, wait_until="load")
            page.fill(HEADER, t)
            out["paste, from the header"].append(timed(page, "press", HEADER, f"{FIRST}, #source")[0])
            ctx.close()
            ctx, page = fresh()
            page.goto(base + "/search/", wait_until="load")
            page.wait_for_timeout(1000)
            page.fill("#q", t)
            out["paste on /search/"].append(timed(page, "click", "#search-form button", f"{FIRST}, #source")[0])
            ctx.close()
    return out


def shown(browser: Any, base: str) -> dict[str, list[str]]:
    """Every labelled query's results list as the page shows it once the lookup has answered: its
    links, in order. Each query lands on /search/?q=..., as the header's box sends it."""
    out: dict[str, list[str]] = {}
    page = browser.new_page()
    for name in QUERY_SETS:
        for q in yaml.safe_load((DATA / name).read_text(encoding="utf-8"))["queries"]:
            text = q["query"]
            page.goto(base + "/search/?" + urlencode({"q": text}), wait_until="domcontentloaded")
            page.wait_for_function(ANSWERED, timeout=30000)
            if not page.url.split("?")[0].endswith("/search/"):  # an exact message: its page
                out[text] = ["-> " + page.url.split("/errors/")[-1]]
                continue
            out[text] = page.eval_on_selector_all("#results li > a, #results li > span.nolink",
                                                  "els => els.map(e => e.getAttribute('href') || e.textContent)")
    page.close()
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--site", type=Path, required=True, help="a built site (kb build -o DIR)")
    ap.add_argument("--queries", type=int, default=12, help="word queries (and half as many pastes) to time")
    ap.add_argument("--results", type=Path, help="write the results list of every labelled query to FILE")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    errors = sorted((args.site / "errors").iterdir()) if (args.site / "errors").is_dir() else []
    error_page = next((f"/errors/{p.name}/" for p in errors if (p / "index.html").is_file()), "/about/")
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(args.site)], stdout=subprocess.PIPE, text=True,
                            cwd=ROOT)
    try:
        assert proc.stdout is not None
        base = f"http://127.0.0.1:{int(proc.stdout.readline())}"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            try:
                if args.results:
                    args.results.write_text(json.dumps(shown(browser, base), indent=1, ensure_ascii=False) + "\n")
                    print(f"results of the labelled queries written to {args.results}")
                times = measure(browser, base, error_page, word_queries(args.queries),
                                pastes(max(1, args.queries // 2)))
            finally:
                browser.close()
    finally:
        proc.terminate()
        proc.wait()
    floor = statistics.median(times["floor: /about/ loads"])
    print(f"{args.site}: medians over fresh browser contexts (loopback, {KEY_DELAY_MS} ms a typed key)")
    for case, xs in times.items():
        if xs:
            med = statistics.median(xs)
            print(f"  {case:26} {med * 1000:6.0f} ms  (max {max(xs) * 1000:5.0f} ms, n={len(xs)}, "
                  f"{med / floor:4.1f}x the floor)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
