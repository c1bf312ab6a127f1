"""The worst single line for the lookup: crafted 10 KB lines against the real release's index,
timed in `kb explain` (Python) and in the site's search (search.js in Debian's chromium), with
the same index. Each case is built to make a backtracking matcher blow up: a template's
literal parts repeated without its end, a prefix repeated, thousands of exception markers,
brackets for the edge values, a lower-cased line, the words of a template for the alignment.

    python bench/worst.py [--vllm-version 0.33.0] [--no-browser]
"""

from __future__ import annotations

import argparse
import http.server
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kb import PINNED_VLLM  # noqa: E402
from kb.explain.match import Matcher, explain, load_index  # noqa: E402
from kb.jobs import match_index_for  # noqa: E402
from kb.scan.source import SourceSpec  # noqa: E402

SIZE = 10_000
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def cases(index: dict[str, Any]) -> dict[str, str]:
    entries = [e for e in index["entries"] if e.get("matchable")]
    wide = max(entries, key=lambda e: (len(e["names"]), e["literal"], e["id"]))  # the most placeholders
    parts = wide["parts"]
    almost = "ValueError: " + parts[0] + "".join("7" + p for p in parts[1:-1])  # every part but the last
    long_first = max(entries, key=lambda e: (len(e["parts"][0]), e["id"]))["parts"][0]
    words = " ".join(" ".join(e["parts"]) for e in entries[:40])
    out = {
        f"{len(wide['names'])}-placeholder template without its end, repeated": (almost * (SIZE // len(almost) + 1))[:SIZE],
        "one template's start repeated": ("ValueError: " + long_first[:40]) * (SIZE // (12 + min(40, len(long_first)))),
        "exception markers only": "ValueError: " * (SIZE // 12),
        "open brackets before a message": "[" * (SIZE - 200) + " does not support LoRA, but LoRA is enabled.",
        "lower case, every template's words": words.lower()[:SIZE],
        "no space at all": "x" * SIZE,
        "160 words of one template (alignment)": " ".join((" ".join(wide["parts"]).split() * 40)[:160]),
    }
    return {k: v[:SIZE] for k, v in out.items()}


def cli_times(matcher: Matcher, lines: dict[str, str]) -> dict[str, float]:
    out = {}
    for name, line in lines.items():
        explain(line, matcher)  # warm
        best = min(_timed(lambda line=line: explain(line, matcher)) for _ in range(3))
        out[name] = best
    return out


def _timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def browser_times(version: str, lines: dict[str, str]) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="kb-worst-"))
    try:
        site = work / "site"
        subprocess.run([sys.executable, "-m", "kb", "build", "--vllm-version", version, "-o", str(site), "--quiet"],
                       check=True)
        handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=str(site), **k)  # noqa: E731
        http.server.SimpleHTTPRequestHandler.log_message = lambda *a: None  # type: ignore[method-assign]
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        out = {}
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
            page = b.new_page()
            page.goto(f"http://127.0.0.1:{srv.server_address[1]}/search/")
            page.wait_for_function("window.kbExplain !== undefined && document.getElementById('status').textContent === ''",
                                   timeout=120_000)
            for name, line in lines.items():
                ms = page.evaluate("(t) => { window.kbExplain(t); var best = 1e9; for (var i = 0; i < 3; i++) {"
                                   " var s = performance.now(); window.kbExplain(t); best = Math.min(best,"
                                   " performance.now() - s); } return best; }", line)
                out[name] = ms / 1000
            b.close()
        srv.shutdown()
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vllm-version", default=PINNED_VLLM)
    ap.add_argument("--no-browser", action="store_true")
    args = ap.parse_args()
    index = load_index(match_index_for(SourceSpec(vllm_version=args.vllm_version)))
    matcher = Matcher(index)
    lines = cases(index)
    short = "ValueError: " + json.dumps("x")  # the floor: a short line that matches nothing
    floor = min(_timed(lambda: explain(short, matcher)) for _ in range(5))
    cli = cli_times(matcher, lines)
    web = {} if args.no_browser or not shutil.which("chromium") else browser_times(args.vllm_version, lines)
    print(f"vllm {args.vllm_version}: {len(index['entries'])} index entries; floor (a short line) "
          f"{floor * 1000:.2f} ms; target: any single 10 KB line under 50 ms")
    print(f"{'case':<52} {'bytes':>6} {'kb explain':>11} {'browser':>9}")
    for name, line in lines.items():
        b = f"{web[name] * 1000:7.1f} ms" if name in web else "        -"
        print(f"{name:<52} {len(line):>6} {cli[name] * 1000:8.1f} ms {b}  ({cli[name] / floor:,.0f}x floor)")
    worst_cli = max(cli.values())
    print(f"worst: kb explain {worst_cli * 1000:.1f} ms" + (f", browser {max(web.values()) * 1000:.1f} ms" if web else ""))


if __name__ == "__main__":
    main()
