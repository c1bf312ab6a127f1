"""hit@1, hit@3 and MRR of `kb search` on the labelled natural-language queries
(tests/data/search_queries.yaml, and the held-out real and typed sets beside it), against the
pinned release, with the misses of the first.

    python bench/search.py [--json] [--errors DIR]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from kb.jobs import searcher_for
from kb.releases.published import pinned_release
from kb.scan.source import SourceSpec
from kb.search.score import load_queries, score

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "search_queries.yaml"
HELD_OUT = DATA.with_name("search_queries_heldout.yaml")  # never tuned on
TYPED = DATA.with_name("search_queries_typed.yaml")  # typed searches, held out too


def main(argv: list[str]) -> int:
    spec = SourceSpec(vllm_version=pinned_release())
    queries = load_queries(DATA)
    errors = Path(argv[argv.index("--errors") + 1]) if "--errors" in argv else None
    searcher = searcher_for(spec, errors=errors)
    start = time.perf_counter()
    result = score(queries, lambda q: [h.id for h in searcher.search(q, 10)])
    took = time.perf_counter() - start
    by_source: dict[str, list[float]] = {}
    held, typed = load_queries(HELD_OUT), load_queries(TYPED)
    for kind in ("typed", "real", "held-out", "typed-out"):
        chosen = held if kind == "held-out" else typed if kind == "typed-out" else \
            [q for q in queries if (q.source == "typed") == (kind == "typed")]
        if chosen:
            s = score(chosen, lambda q: [h.id for h in searcher.search(q, 10)])
            by_source[kind] = [s.n, s.hit1, s.hit3, s.mrr]
    if "--json" in argv:
        print(json.dumps({"n": result.n, "hit1": result.hit1, "hit3": result.hit3, "mrr": result.mrr,
                          "by_source": by_source}, indent=1))
        return 0
    print(f"{result.n} queries: hit@1 {result.hit1:.1%}  hit@3 {result.hit3:.1%}  MRR {result.mrr:.3f}  "
          f"({took / max(1, result.n) * 1000:.0f} ms per query)")
    for kind, (n, h1, h3, mrr) in by_source.items():
        print(f"  {kind:9} {int(n):3}: hit@1 {h1:.1%}  hit@3 {h3:.1%}  MRR {mrr:.3f}")
    for text, accept, got in result.misses:
        print(f"  miss: {text!r}  want {', '.join(accept)}  got {', '.join(got)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
