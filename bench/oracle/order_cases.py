#!/usr/bin/env python3
"""Real vLLM's first error on launches that break several checks or field constraints at once:
the reference case (48 attention heads, 8 KV heads, TP 16) with each DCP from 1 to 4, and flags
outside their pydantic constraints, alone and together. Recorded to
tests/data/oracle-order-<version>.json for the default tests of `kb check`'s order
(kb/checks/order.py) and valid values (kb/checks/valid.py).

    python3 bench/oracle/order_cases.py [--version 0.33.0] [--jobs 2]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DEFAULT_VERSION, run_all, write_cases
from parse_cases import LLAMA

REFERENCE = {**LLAMA, "hidden_size": 6144, "num_attention_heads": 48, "num_key_value_heads": 8,
             "intermediate_size": 16384, "max_position_embeddings": 8192}


def cases() -> list[dict]:
    out = [{"argv": ["$MODEL", "-tp", "16", "-dcp", str(d)], "config": REFERENCE, "hardware": {"count": 16}}
           for d in (1, 2, 3, 4)]
    for argv in (["--gpu-memory-utilization", "1.5"], ["--max-num-seqs", "0"], ["--max-loras", "0", "--enable-lora"],
                 ["--gpu-memory-utilization", "1.5", "--max-num-seqs", "0"], ["-dp", "0"], ["-pp", "0"],
                 ["--max-num-seqs", "0", "-tp", "16", "-dcp", "3"], ["--gpu-memory-utilization", "0"]):
        out.append({"argv": ["$MODEL", *argv], "config": LLAMA, "hardware": {"count": 8}})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default=DEFAULT_VERSION)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    todo = cases()
    records = run_all(todo, args.version, args.jobs, ("config", "hardware"))
    write_cases("order", args.version, records, "order_cases.py")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
