#!/usr/bin/env python3
"""The six proof cases of bench/oracle/README.md, on 16 fake H100s with a Llama-like config.

    python3 bench/oracle/demo.py [--json]

Prints one line per case (outcome, stage, exception, message, wall time of the child), or the
full results with --json.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_case import run_case  # noqa: E402

LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "num_attention_heads": 48,
    "num_key_value_heads": 8,
    "num_hidden_layers": 2,
    "hidden_size": 6144,
    "head_dim": 128,
    "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16",
    "vocab_size": 32000,
    "intermediate_size": 16384,
}
H100_X16 = {"count": 16, "capability": "9.0", "memory_gib": 80, "name": "NVIDIA H100 80GB HBM3"}
CASES = {
    "a": ["--tensor-parallel-size", "16", "--decode-context-parallel-size", "4"],
    "b": ["--tensor-parallel-size", "16", "--decode-context-parallel-size", "3"],
    "c": ["--tensor-parallel-size", "16", "--decode-context-parallel-size", "2"],
    "d": ["--max-lora-rank", "24", "--enable-lora"],
    "e": ["--gpu-memory-utilization", "1.5"],
    "f": [],
}


def main() -> int:
    as_json = "--json" in sys.argv[1:]
    results = {}
    for name, extra in CASES.items():
        t = time.monotonic()
        r = run_case({"argv": ["--model", "/path/to/model", *extra], "config": LLAMA, "hardware": H100_X16})
        r["outer_s"] = round(time.monotonic() - t, 2)
        results[name] = r
        if not as_json:
            line = f"({name}) {' '.join(extra) or '(no extra flags)'}: {r['outcome']}"
            if r["outcome"] == "error":
                line += f" [{r['stage']}] {r['exception']}"
                if r.get("inner_exception"):
                    line += f"({r['inner_exception']})"
                line += f": {r['message']}"
            elif r["outcome"] == "ok":
                s = r["summary"]
                line += (f" tp={s['tensor_parallel_size']} dcp={s['decode_context_parallel_size']} "
                         f"world={s['world_size']} backend={s['distributed_executor_backend']} "
                         f"max_model_len={s['max_model_len']} v2_runner={s['use_v2_model_runner']}")
            print(f"{line}  ({r['elapsed_s']} s)", flush=True)
    if as_json:
        for r in results.values():
            r.pop("traceback", None)
        print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
