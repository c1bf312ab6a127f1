"""What kb fit's suggestions cost (kb/fit/suggest.py): for launches of Llama-3.1-70B on an H100
that do not fit, the time of fit_and_suggest (the launch sized, then each changed launch sized
again) against the floor measured in the same run, fit_one on the same launch; and the
suggestions found. Reads the release through kb's cache (`KB_CACHE_DIR`).

    python bench/fit_suggest.py [--vllm-version 0.34.0] [--repeat 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kb import PINNED_VLLM
from kb.checks.launch import ConfigFile
from kb.fit.launch import fit_one
from kb.fit.suggest import fit_and_suggest, shown
from kb.hardware import hardware_facts
from kb.jobs import _check_inputs
from kb.scan.source import SourceSpec

LLAMA_70B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192,
             "num_attention_heads": 64, "num_key_value_heads": 8, "num_hidden_layers": 80,
             "intermediate_size": 28672, "vocab_size": 128256, "torch_dtype": "bfloat16",
             "max_position_embeddings": 131072}
LAUNCHES = (
    ("-tp 1", {}),
    ("-tp 2", {}),
    ("-tp 4 --gpu-memory-utilization 0.5", {}),
    ("-tp 2 --no-enable-extensible-kv-cache", {}),
    ("-tp 4 --max-model-len 8192 --no-enable-extensible-kv-cache", {"gpu_memory_used_gib": 20}),
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vllm-version", default=PINNED_VLLM)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    records, model, derived = _check_inputs(SourceSpec(vllm_version=args.vllm_version), None, True)
    assert model is not None
    config = ConfigFile("config.json", LLAMA_70B)
    print(f"vLLM {args.vllm_version}, Llama-3.1-70B on one H100, best of {args.repeat}")
    for flags, extra in LAUNCHES:
        argv = ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", *flags.split()]
        hardware = {**hardware_facts("h100", None, None, None), **extra}
        floor, full = [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            fit_one(records, model, argv, config, hardware)
            floor.append(time.perf_counter() - t)
            t = time.perf_counter()
            report = fit_and_suggest(records, model, derived, argv, config, hardware)
            full.append(time.perf_counter() - t)
        sized = 1 + sum(len(s.tried) + 1 for s in report.suggestions)
        found = ", ".join(f"{s.option} {shown(s.new)}" for s in report.suggestions) or "none"
        print(f"  {flags:58s} {report.errors[0].key if report.errors else 'fits':12s} fit_one {min(floor) * 1000:6.1f} ms, "
              f"with suggestions {min(full) * 1000:7.1f} ms ({min(full) / min(floor):5.1f}x, >= {sized} launches "
              f"sized): {found}")


if __name__ == "__main__":
    main()
