#!/usr/bin/env python3
"""Real vLLM on launches whose errors hang on values vLLM computes before its guards
(kb/checks/computed.py): `max_model_len` from config.json (the keys it reads, RoPE scaling,
`model_max_length`), and the defaults of `max_num_batched_tokens`, `max_num_seqs` and
`enable_chunked_prefill` per usage context and GPU (H100, A100 by name, a 24 GiB L4, a 180 GiB
B200). The launches are chosen by hand around those values; the labels are what the real vLLM
did. `--random N --seed S` adds N launches drawn at random from the same models, GPUs and flag
values (a set kb was not tuned on). Written to tests/data/oracle-computed-<version>.json, which
the default tests read (tests/test_agreement.py).

    python3 bench/oracle/computed_cases.py [--version 0.33.0] [--jobs 2] [--random 60 --seed 31]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DEFAULT_VERSION, case_key, distinct, recorded, run_all, write_cases
from launch_cases import MODELS

LLAMA3 = MODELS["meta-llama/Meta-Llama-3-8B"]
CONFIGS: dict[str, dict[str, Any]] = {
    "llama3": LLAMA3,
    "llama-linear4": {**LLAMA3, "max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 4.0}},
    "llama-dynamic2": {**LLAMA3, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}},
    "llama-llama3x8": {**LLAMA3, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                  "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}},
    "llama-model-max-length": {**LLAMA3, "model_max_length": 16384},
    "qwen2.5": MODELS["Qwen/Qwen2.5-7B-Instruct"],
    "mixtral": MODELS["mistralai/Mixtral-8x7B-v0.1"],
    "gpt2": {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_positions": 1024, "n_ctx": 1024,
             "n_embd": 768, "n_layer": 2, "n_head": 12, "vocab_size": 50257, "torch_dtype": "float32"},
}
GPUS: dict[str, dict[str, Any]] = {
    "h100": {},  # the oracle's default: NVIDIA H100 80GB HBM3, 80 GiB, 9.0
    "a100": {"name": "NVIDIA A100-SXM4-80GB", "memory_gib": 80, "capability": "8.0"},
    "l4": {"name": "NVIDIA L4", "memory_gib": 24, "capability": "8.9"},
    "b200": {"name": "NVIDIA B200", "memory_gib": 180, "capability": "10.0"},
}
LAUNCHES: list[tuple[str, str, list[str]]] = [
    *[(m, g, []) for m in ("llama3", "gpt2") for g in GPUS],
    *[("llama3", g, ["--max-num-seqs", n]) for g in GPUS for n in ("2048", "4096", "16384")],
    ("llama3", "h100", ["--max-num-seqs", "16384", "--performance-mode", "throughput"]),
    ("llama3", "h100", ["--max-num-seqs", "20000", "--performance-mode", "throughput"]),
    ("llama3", "l4", ["--max-num-seqs", "4096", "--performance-mode", "throughput"]),
    ("llama3", "h100", ["--no-enable-chunked-prefill", "--max-num-batched-tokens", "4096"]),
    ("llama3", "h100", ["--no-enable-chunked-prefill", "--max-num-seqs", "9000"]),
    ("llama3", "l4", ["--no-enable-chunked-prefill", "--max-num-seqs", "4096"]),
    ("llama3", "l4", ["--no-enable-chunked-prefill", "--max-num-seqs", "9000"]),
    ("llama-linear4", "h100", ["--no-enable-chunked-prefill", "--max-model-len", "16384",
                               "--max-num-batched-tokens", "8192"]),
    *[(m, "h100", ["--max-model-len", n]) for m, n in (
        ("llama-linear4", "16384"), ("llama-linear4", "16385"), ("llama-dynamic2", "16384"), ("llama-dynamic2", "16385"),
        ("llama-llama3x8", "8192"), ("llama-llama3x8", "16384"), ("llama-model-max-length", "16384"),
        ("llama-model-max-length", "16385"), ("gpt2", "1024"), ("gpt2", "2048"), ("qwen2.5", "32768"),
        ("qwen2.5", "65536"), ("mixtral", "32769"))],
    *[(m, "h100", ["--long-prefill-token-threshold", n]) for m, n in (
        ("llama3", "8192"), ("llama3", "8193"), ("llama-linear4", "16384"), ("llama-linear4", "16385"),
        ("llama-dynamic2", "16000"), ("llama-dynamic2", "17000"), ("llama-llama3x8", "9000"),
        ("llama-model-max-length", "16384"), ("llama-model-max-length", "16385"), ("gpt2", "1000"), ("gpt2", "1025"),
        ("qwen2.5", "40000"))],
    ("llama3", "h100", ["--long-prefill-token-threshold", "5000", "--max-model-len", "4096"]),
    *[("llama3", g, ["--max-num-active-seqs", n]) for g in ("h100", "a100", "b200") for n in ("300", "1024", "1025")],
    ("llama3", "h100", ["--max-num-active-seqs", "2000", "--performance-mode", "throughput"]),
    ("gpt2", "h100", ["--max-num-seqs", "16", "--max-model-len", "256"]),
    ("gpt2", "h100", ["--no-enable-chunked-prefill", "--max-model-len", "512", "--max-num-seqs", "9000"]),
    ("llama3", "h100", ["--max-num-batched-tokens", "1000", "--max-num-active-seqs", "1001"]),
]


CONFIGS["phi3-longrope"] = {
    "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 32,
    "num_key_value_heads": 32, "num_hidden_layers": 4, "intermediate_size": 8192, "vocab_size": 32064,
    "max_position_embeddings": 131072, "original_max_position_embeddings": 4096, "torch_dtype": "bfloat16",
    "rope_scaling": {"type": "longrope", "long_factor": [1.0] * 48, "short_factor": [1.0] * 48}, "rope_theta": 10000.0}
CONFIGS["deepseek-v2-lite"] = MODELS["deepseek-ai/DeepSeek-V2-Lite"]
CONFIGS["gemma-2"] = MODELS["google/gemma-2-9b"]
WORDS: tuple[tuple[str, ...], ...] = (
    ("--max-num-seqs", "64", "512", "1024", "2048", "3000", "8192", "16384", "40000"),
    ("--max-num-batched-tokens", "512", "2048", "4096", "8192", "32768"),
    ("--max-model-len", "1024", "4096", "8192", "16384", "32768", "131072", "-1"),
    ("--long-prefill-token-threshold", "0", "1000", "4096", "9000", "40000"),
    ("--max-num-active-seqs", "100", "300", "1000", "2048"),
    ("--performance-mode", "balanced", "interactivity", "throughput"),
    ("--enable-chunked-prefill", "--no-enable-chunked-prefill"),
)


def draw(rng: random.Random) -> dict[str, Any]:
    words: list[str] = []
    for option in rng.sample(WORDS, rng.randint(1, 3)):
        if option[0] == "--enable-chunked-prefill":
            words.append(rng.choice(option))
        else:
            words += [option[0], rng.choice(option[1:])]
    m, g = rng.choice(sorted(CONFIGS)), rng.choice(sorted(GPUS))
    return {"argv": ["$MODEL", *words], "config": CONFIGS[m], "model": m, "hardware": {"count": 8, **GPUS[g]}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default=DEFAULT_VERSION)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--random", type=int, default=0, help="add this many random launches to the recorded set")
    ap.add_argument("--seed", type=int, default=31)
    args = ap.parse_args()
    kept = recorded("computed", args.version)
    if args.random:
        rng = random.Random(args.seed)
        todo = distinct(lambda: draw(rng), args.random, {case_key(c) for c in kept})
        for c in todo:
            c["seed"] = args.seed
    else:
        kept = [c for c in kept if "seed" in c]  # the hand-picked launches are run again
        todo = [{"argv": ["$MODEL", *words], "config": CONFIGS[m], "model": m,
                 "hardware": {"count": 8, **GPUS[g]}} for m, g, words in LAUNCHES]
    print(f"{len(todo)} launches; running real vLLM", flush=True)
    out = run_all(todo, args.version, args.jobs, ("model", "config", "hardware", *(("seed",) if args.random else ())))
    write_cases("computed", args.version, kept + out, "computed_cases.py")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
