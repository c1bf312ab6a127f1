#!/usr/bin/env python3
"""Real vLLM's verdict on command lines around its argument parser: every case through
`run_case.py` (vLLM's own `vllm serve` parsing and config building, fake GPUs), recorded to
tests/data/oracle-parse-<version>.json so that the default tests compare kb's parser stage
(kb/checks/cli_parse.py) with vLLM without installing it.

    python3 bench/oracle/parse_cases.py [--version 0.33.0] [--jobs 2] [--flags-from 0.33.0]

The cases are drawn from vLLM's own recorded parser (tests/data/vllm-<version>-flags.json, from
help.py): for flags with choices, a value outside them and one inside; for int and float flags,
a word that is not a number; size flags with suffixes; booleans given `=true`; a flag with no
value; unknown and misspelled flags; `_` in names; `-O3`; dotted JSON keys; `--model`. The model
folder holds a small Llama config.json. Each record keeps the case, vLLM's outcome, stage and
message (argparse's message after "vllm serve: error: ", else the exception's).
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DEFAULT_VERSION, REPO, run_one, write_cases

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
         "num_attention_heads": 16, "num_key_value_heads": 8, "num_hidden_layers": 4, "intermediate_size": 5632,
         "vocab_size": 32000, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}
PICKED_CHOICES = ("--dtype", "--max-lora-rank", "--kv-cache-dtype", "--load-format", "--tokenizer-mode",
                  "--distributed-executor-backend", "--quantization", "--runner", "--convert", "--block-size",
                  "--performance-mode", "--guided-decoding-backend", "--structured-outputs-config.backend")
PICKED_NUMBERS = ("--tensor-parallel-size", "--pipeline-parallel-size", "--max-num-seqs", "--gpu-memory-utilization",
                  "--max-num-batched-tokens", "--max-loras", "--swap-space", "--seed", "--port")


def cases(flags_doc: dict) -> list[list[str]]:
    actions = {a["option_strings"][0]: a for a in flags_doc["actions"] if a.get("option_strings")}
    out: list[list[str]] = []
    for name, a in sorted(actions.items()):  # every flag with choices: a value outside them
        choices = a.get("choices")
        if choices:
            out.append(["$MODEL", name, "not-a-choice" if isinstance(choices[0], str) else "24"])
    for name in PICKED_CHOICES:  # and for some, the first value inside them
        a = actions.get(name)
        if a is not None and a.get("choices"):
            out.append(["$MODEL", name, str(a["choices"][0])])
    numbers = [n for n, a in sorted(actions.items()) if a.get("type") in ("int", "float")]
    for name in [*PICKED_NUMBERS, *numbers[:12]]:
        if name in actions and ["$MODEL", name, "many"] not in out:
            out.append(["$MODEL", name, "many"])
    out += [
        ["$MODEL", "-tp", "2.5"], ["$MODEL", "--max-model-len", "98k"], ["$MODEL", "--max-model-len", "1.5K"],
        ["$MODEL", "--max-model-len", "4K"], ["$MODEL", "--max-model-len", "auto"], ["$MODEL", "--max-model-len", "lots"],
        ["$MODEL", "--max-num-batched-tokens", "2k"], ["$MODEL", "--enforce-eager=true"],
        ["$MODEL", "--enable-prefix-caching", "--no-enable-prefix-caching"], ["$MODEL", "--max-num-seqs"],
        ["$MODEL", "--no-such-flag"], ["$MODEL", "--max_num_seqs", "8"], ["$MODEL", "--tensor_parallel_size", "x"],
        ["$MODEL", "-O3"], ["$MODEL", "-O", "2"], ["$MODEL", "--compilation-config.mode", "3"],
        ["$MODEL", "--compilation-config", "{not json"], ["$MODEL", "--speculative-config", "notjson"],
        ["$MODEL", "--hf-overrides", "{bad"], ["--served-model-name", "x", "--model", "$MODEL"],
        ["--served-model-name", "x"], ["$MODEL", "--trust-remote-code", "--max-model-len", "2048"],
        ["$MODEL", "--lora-modules", "a=b", "--enable-lora"], ["$MODEL", "--task", "embed"],
        ["$MODEL", "--gpu-memory-utilization", "0.5", "--max-num-seqs", "16"],
    ]
    return out


def run(case: list[str], version: str) -> dict:
    record = run_one({"argv": case, "config": LLAMA, "hardware": {"count": 8}}, version)
    record.pop("raised_at")
    return record


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default=DEFAULT_VERSION)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--flags-from", metavar="VERSION",
                    help="draw the cases from the parser recorded for this release (default: --version): that "
                         "release's cases, run on --version")
    args = ap.parse_args()
    flags = json.loads((REPO / "tests" / "data" / f"vllm-{args.flags_from or args.version}-flags.json").read_text())
    todo = cases(flags)
    with ThreadPoolExecutor(args.jobs) as pool:
        records = list(pool.map(lambda c: run(c, args.version), todo))  # each without where it was raised
    write_cases("parse", args.version, records, "parse_cases.py", config=LLAMA)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
