#!/usr/bin/env python3
"""Random launches over all of `vllm serve`'s flags that take a switch, a choice or a number (not
only the common ones), through real vLLM (run_case.py, fake H100s): the set that finds the checks kb
derives wrongly (a false alarm) or misses. Flags and values are drawn from vLLM's own recorded
parser (tests/data/vllm-<version>-flags.json, from help.py), never from kb: 1 to 3 flags per launch,
a switch on or off, a choice among its choices, a count or a share from a small set of values (some
out of range on purpose), over the model configs of launch_cases.py. Added to the cases already in
tests/data/oracle-flags-<version>.json; bench/agreement.py and the release test read them.

    python3 bench/oracle/flag_cases.py [--version 0.33.0] [--count 150] [--jobs 2] [--seed 21] [--flags-from 0.33.0]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DEFAULT_VERSION, REPO, case_key, distinct, recorded, run_all, write_cases
from launch_cases import MODELS

# flags whose value is a path, a name, an address or the model itself: not drawn
SKIPPED = ("path", "dir", "file", "host", "url", "key", "ssl", "port", "model", "tokenizer", "name", "template",
           "log", "uds", "root", "origin", "header", "method", "middleware", "revision", "download", "help", "chat",
           "tool", "reasoning", "parser", "plugin", "allowed", "served", "config", "override", "hf-", "lora-modules",
           "prompt", "response", "api", "token", "json", "otlp", "trace", "profil", "kv-events", "disable-log",
           "headless", "data-parallel-address", "data-parallel-rpc", "nnodes", "node-rank", "worker")
COUNTS = ("0", "1", "2", "3", "4", "8", "16", "64", "512", "4096", "-1")
SHARES = ("0.1", "0.5", "0.9", "1.0", "1.5")


def options(a: dict[str, Any]) -> Optional[list[list[str]]]:
    """The words that set one flag, for each value drawn from; None for a flag not drawn."""
    names = a.get("option_strings") or []
    if not names or any(s in names[0] for s in SKIPPED) or a.get("help_suppressed") or a.get("deprecated"):
        return None
    first = names[0]
    if a["action"] == "EnableDisableAction":
        off = next((n for n in names if n.startswith("--no-")), None)
        return [[first]] + ([[off]] if off else [])
    if a["action"] == "_StoreTrueAction":
        return [[first]]
    if a["action"] != "_StoreAction" or a.get("nargs") not in (None, "?"):
        return None
    if a.get("choices"):
        return [[first, str(c)] for c in a["choices"]]
    default = a.get("default")
    if a.get("type") in ("int", "human_readable_int") or (isinstance(default, int) and not isinstance(default, bool)):
        return [[first, v] for v in COUNTS]
    if a.get("type") == "float" or isinstance(default, float):
        return [[first, v] for v in SHARES]
    return None


def cases(flags_doc: dict[str, Any], count: int, seed: int, known: set[str]) -> list[dict[str, Any]]:
    pool = [o for o in (options(a) for a in flags_doc["actions"]) if o]
    rng = random.Random(seed)

    def draw() -> dict[str, Any]:
        model = rng.choice(sorted(MODELS))
        words: list[str] = []
        for chosen in rng.sample(pool, rng.randint(1, 3)):
            words += rng.choice(chosen)
        return {"argv": ["$MODEL", *words], "model": model, "hardware": {"count": 8}}

    return distinct(draw, count, known)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default=DEFAULT_VERSION)
    ap.add_argument("--count", type=int, default=150)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--flags-from", metavar="VERSION",
                    help="draw from the parser recorded for this release (default: --version); with the same seeds, "
                         "the same launches as that release's set, run on --version")
    args = ap.parse_args()
    flags = json.loads((REPO / "tests" / "data" / f"vllm-{args.flags_from or args.version}-flags.json").read_text())
    kept = recorded("flags", args.version)
    todo = cases(flags, args.count, args.seed, {case_key(c) for c in kept})
    done = run_all(todo, args.version, args.jobs, ("model", "hardware"), lambda c: {**c, "config": MODELS[c["model"]]})
    write_cases("flags", args.version, kept + done, "flag_cases.py", models=MODELS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
