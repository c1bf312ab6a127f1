#!/usr/bin/env python3
"""Random launches over real model configs, through real vLLM (run_case.py, fake H100s), recorded
to tests/data/oracle-launch-<version>.json; `python3 bench/oracle/agreement.py` (or the release
test) then compares `kb check`'s first error with vLLM's on each.

    python3 bench/oracle/launch_cases.py [--version 0.33.0] [--count 300] [--jobs 2] [--seed 15] [--append]

The configs are the config.json of five public checkpoints (Llama 3 8B, Qwen2.5 7B, Mixtral 8x7B,
DeepSeek-V2-Lite with MLA, Gemma 2 9B). Each case draws, with a fixed seed, a model, a GPU count
and values for common flags: parallel sizes (TP, PP, DP, DCP, expert parallel), context length,
memory share, batch limits, dtype, quantization, KV cache dtype, LoRA, eager mode, prefix
caching; duplicates are drawn again.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Collection
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DEFAULT_VERSION, REPO, case_key, distinct, recorded, run_all, write_cases

MODELS: dict[str, dict] = {
    "meta-llama/Meta-Llama-3-8B": {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
        "num_key_value_heads": 8, "num_hidden_layers": 32, "intermediate_size": 14336, "vocab_size": 128256,
        "max_position_embeddings": 8192, "rope_theta": 500000.0, "rms_norm_eps": 1e-05, "hidden_act": "silu",
        "torch_dtype": "bfloat16", "bos_token_id": 128000, "eos_token_id": 128001, "tie_word_embeddings": False},
    "Qwen/Qwen2.5-7B-Instruct": {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28,
        "num_key_value_heads": 4, "num_hidden_layers": 28, "intermediate_size": 18944, "vocab_size": 152064,
        "max_position_embeddings": 32768, "rope_theta": 1000000.0, "rms_norm_eps": 1e-06, "hidden_act": "silu",
        "torch_dtype": "bfloat16", "use_sliding_window": False, "sliding_window": 131072, "max_window_layers": 28,
        "tie_word_embeddings": False, "bos_token_id": 151643, "eos_token_id": 151645},
    "mistralai/Mixtral-8x7B-v0.1": {
        "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": 4096,
        "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32, "intermediate_size": 14336,
        "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000, "max_position_embeddings": 32768,
        "rope_theta": 1000000.0, "rms_norm_eps": 1e-05, "hidden_act": "silu", "torch_dtype": "bfloat16",
        "sliding_window": None, "router_aux_loss_coef": 0.02, "tie_word_embeddings": False},
    "deepseek-ai/DeepSeek-V2-Lite": {
        "architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2", "hidden_size": 2048,
        "num_attention_heads": 16, "num_key_value_heads": 16, "num_hidden_layers": 27, "intermediate_size": 10944,
        "moe_intermediate_size": 1408, "n_routed_experts": 64, "n_shared_experts": 2, "num_experts_per_tok": 6,
        "kv_lora_rank": 512, "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
        "v_head_dim": 128, "first_k_dense_replace": 1, "moe_layer_freq": 1, "vocab_size": 102400,
        "max_position_embeddings": 163840, "rope_theta": 10000, "rms_norm_eps": 1e-06, "hidden_act": "silu",
        "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 0.707, "mscale_all_dim": 0.707,
                         "original_max_position_embeddings": 4096, "type": "yarn"},
        "topk_method": "greedy", "n_group": 1, "topk_group": 1, "routed_scaling_factor": 1.0,
        "scoring_func": "softmax", "norm_topk_prob": False, "aux_loss_alpha": 0.001, "seq_aux": True,
        "torch_dtype": "bfloat16", "bos_token_id": 100000, "eos_token_id": 100001, "tie_word_embeddings": False},
    "google/gemma-2-9b": {
        "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "hidden_size": 3584,
        "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256, "num_hidden_layers": 42,
        "intermediate_size": 14336, "vocab_size": 256000, "max_position_embeddings": 8192, "rope_theta": 10000.0,
        "rms_norm_eps": 1e-06, "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
        "sliding_window": 4096, "query_pre_attn_scalar": 256, "attn_logit_softcapping": 50.0,
        "final_logit_softcapping": 30.0, "torch_dtype": "float32", "bos_token_id": 2, "eos_token_id": 1,
        "pad_token_id": 0, "cache_implementation": "hybrid"},
}

CHOICES: dict[str, list[list[str]]] = {
    "tp": [["-tp", v] for v in ("1", "2", "4", "8", "16", "3", "6", "32")],
    "pp": [["-pp", v] for v in ("1", "2", "3")],
    "dp": [["-dp", v] for v in ("1", "2")],
    "dcp": [["-dcp", v] for v in ("1", "2", "3", "4", "8")],
    "ep": [["--enable-expert-parallel"]],
    "len": [["--max-model-len", v] for v in ("2048", "8192", "32k", "128k", "1M", "98k", "4K")],
    "mem": [["--gpu-memory-utilization", v] for v in ("0.5", "0.9", "0.95", "1.2", "0")],
    "seqs": [["--max-num-seqs", v] for v in ("1", "64", "256", "4096", "0")],
    "tokens": [["--max-num-batched-tokens", v] for v in ("512", "2048", "8192", "65536")],
    "dtype": [["--dtype", v] for v in ("auto", "bfloat16", "float16", "half", "float32")],
    "quant": [["--quantization", v] for v in ("fp8", "awq", "gptq", "bitsandbytes")],
    "kv": [["--kv-cache-dtype", v] for v in ("auto", "fp8", "fp8_e5m2")],
    "lora": [["--enable-lora", "--max-lora-rank", v] for v in ("8", "16", "64", "24")] +
            [["--enable-lora", "--max-loras", v] for v in ("1", "4", "0")],
    "eager": [["--enforce-eager"]],
    "prefix": [["--no-enable-prefix-caching"]],
}
WEIGHTS = {"tp": 0.7, "pp": 0.2, "dp": 0.15, "dcp": 0.25, "ep": 0.15, "len": 0.4, "mem": 0.3, "seqs": 0.3,
           "tokens": 0.25, "dtype": 0.3, "quant": 0.12, "kv": 0.15, "lora": 0.15, "eager": 0.2, "prefix": 0.1}


def draw(rng: random.Random) -> dict:
    name = rng.choice(sorted(MODELS))
    argv = ["$MODEL"]
    for group, p in WEIGHTS.items():
        if rng.random() < p:
            argv += rng.choice(CHOICES[group])
    count = 16 if any(w in ("16", "32") for w in argv) and rng.random() < 0.7 else 8
    return {"model": name, "argv": argv, "config": MODELS[name], "hardware": {"count": count}}


def cases(count: int, seed: int, known: Collection[str] = frozenset()) -> list[dict]:
    rng = random.Random(seed)
    return distinct(lambda: draw(rng), count, known)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default=DEFAULT_VERSION)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--append", action="store_true", help="keep the recorded cases and add these (another seed)")
    args = ap.parse_args()
    kept = recorded("launch", args.version) if args.append else []
    todo = cases(args.count, args.seed, {case_key(c) for c in kept})
    records = kept + run_all(todo, args.version, args.jobs, ("model", "hardware"))
    out = REPO / "tests" / "data" / f"oracle-launch-{args.version}.json"
    before = json.loads(out.read_text()).get("seeds", []) if kept else []
    seeds = sorted({*before, args.seed})
    write_cases("launch", args.version, records, "launch_cases.py", seed=seeds[0], seeds=seeds, models=MODELS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
