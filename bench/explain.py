"""kb explain on a real release: index load time, lookups per second, a 10 MB log, and the
share of templates that, filled with sample values, map back to their own id.

    python bench/explain.py [--vllm-version 0.33.0]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kb import PINNED_VLLM  # noqa: E402
from kb.jobs import match_index_for  # noqa: E402
from kb.explain.match import Matcher, explain, fill, load_index, round_trip  # noqa: E402
from kb.scan.source import SourceSpec  # noqa: E402

def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vllm-version", default=PINNED_VLLM)
    ap.add_argument("--show-misses", action="store_true")
    args = ap.parse_args()
    path = match_index_for(SourceSpec(vllm_version=args.vllm_version))
    start = time.perf_counter()
    index = load_index(path)
    matcher = Matcher(index)
    t_load = time.perf_counter() - start
    message = ("ValueError: The model's number of query heads per KV head (6) must be divisible by "
               "`--decode-context-parallel-size` (4) for GQA/MQA.")
    explain(message, matcher)
    n = 2000
    start = time.perf_counter()
    for _ in range(n):
        explain(message, matcher)
    per = (time.perf_counter() - start) / n
    rng = random.Random(1)
    usable = [e for e in index["entries"] if e["literal"] >= 8]  # log lines: templates with real text
    lines = []
    size = 0
    while size < 10_000_000:
        if rng.random() < 0.01:
            line = "ERROR 11-30 12:00:00 [core.py:123] ValueError: " + fill(rng.choice(usable), rng)
        else:
            line = (f"INFO 11-30 12:00:{rng.randrange(60):02d} [loggers.py:{rng.randrange(400)}] Engine 000: Avg prompt "
                    f"throughput: {rng.random() * 900:.1f} tokens/s, Avg generation throughput: {rng.random() * 90:.1f} "
                    f"tokens/s, Running: {rng.randrange(64)} reqs, Waiting: 0 reqs, GPU KV cache usage: 3.1%")
        lines.append(line)
        size += len(line) + 1
    log = "\n".join(lines)
    start = time.perf_counter()
    found = explain(log, matcher).found
    t_log = time.perf_counter() - start
    rt = round_trip(matcher)
    share = (rt["own"] + rt["same_text"]) / rt["templates"]
    print(f"vllm {args.vllm_version}: {rt['templates']} ids in the index ({path.stat().st_size / 1e6:.1f} MB)")
    print(f"index load + matcher          {t_load * 1000:8.1f} ms   (target: well under 1 s)")
    print(f"one lookup, short message     {per * 1000:8.3f} ms   {1 / per:,.0f} lookups/s   (target < 5 ms)")
    print(f"10 MB log ({len(lines):,} lines)   {t_log:8.2f} s   {len(found)} distinct errors found   (target < 10 s)")
    print(f"filled templates -> own id    {share:8.2%}   of all {rt['templates']} ids: {rt['own']} best match, "
          f"{rt['same_text']} tied with the same text raised in another file, {rt['other']} to another template, "
          f"{rt['none']} unmatched   (target >= 99.5%)")
    print(f"  not matchable: {rt['templates'] - rt['usable']} ids whose message has no literal text at all "
          f"(e.g. '{{str(e)}}', built at run time)")
    if args.show_misses:
        print("\n".join(rt["misses"]))


if __name__ == "__main__":
    main()
