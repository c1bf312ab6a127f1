#!/usr/bin/env python3
"""Real vLLM on launches around the quantization capability check (vllm/config/vllm.py,
`VllmConfig._get_quantization_config`: "The quantization method X is not supported for the
current GPU. Minimum capability: N. Current capability: M."): quantized checkpoints (AWQ, GPTQ)
and `--quantization` methods on fake GPUs of compute capability 5.2 to 9.0. The launches are
chosen by hand; the labels are what the real vLLM did. Written to
tests/data/oracle-capability-<version>.json, which the default tests read (tests/test_agreement.py).

    python3 bench/oracle/capability_cases.py [--version 0.33.0] [--jobs 2]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DEFAULT_VERSION, run_all, write_cases
from launch_cases import MODELS

LLAMA3 = {**MODELS["meta-llama/Meta-Llama-3-8B"], "torch_dtype": "float16"}
CONFIGS: dict[str, dict[str, Any]] = {
    "llama3-fp16": LLAMA3,
    "llama3-awq": {**LLAMA3, "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128,
                                                     "zero_point": True, "version": "gemm"}},
    "llama3-gptq": {**LLAMA3, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128,
                                                      "desc_act": False, "sym": True}},
    "mixtral": {**MODELS["mistralai/Mixtral-8x7B-v0.1"], "torch_dtype": "float16"},
}
GPUS: dict[str, dict[str, Any]] = {  # name and memory as torch reports them (kb/hardware.py)
    "5.2": {"name": "Tesla M60", "memory_gib": 7.4, "capability": "5.2"},
    "6.0": {"name": "Tesla P100-PCIE-16GB", "memory_gib": 15.9, "capability": "6.0"},
    "7.0": {"name": "Tesla V100-SXM2-32GB", "memory_gib": 31.74, "capability": "7.0"},
    "7.5": {"name": "Tesla T4", "memory_gib": 14.58, "capability": "7.5"},
    "8.0": {"name": "NVIDIA A100-SXM4-80GB", "memory_gib": 79.15, "capability": "8.0"},
    "8.9": {"name": "NVIDIA L40S", "memory_gib": 44.39, "capability": "8.9"},
    "9.0": {},  # the oracle's H100
}
LAUNCHES: list[tuple[str, str, list[str]]] = [
    *[("llama3-awq", cc, []) for cc in ("6.0", "7.0", "7.5", "8.0")],
    *[("llama3-awq", cc, ["--quantization", "awq_marlin"]) for cc in ("7.0", "8.0")],
    *[("llama3-gptq", cc, []) for cc in ("5.2", "6.0", "7.0", "8.0")],
    *[("llama3-fp16", cc, ["--quantization", "fp8"]) for cc in ("7.0", "7.5", "8.0", "8.9")],
    *[("llama3-fp16", cc, ["--quantization", m]) for m in ("fp8_per_tensor", "mxfp4", "mxfp8")
      for cc in ("7.0", "7.5", "8.0")],
    *[("mixtral", cc, ["--quantization", "experts_int8"]) for cc in ("7.5", "8.0")],
    *[("llama3-fp16", cc, ["--quantization", "fbgemm_fp8", "--allow-deprecated-quantization"])
      for cc in ("7.5", "8.0")],
    *[("llama3-fp16", cc, ["--quantization", "modelopt"]) for cc in ("7.5", "8.9")],
    *[("llama3-fp16", cc, []) for cc in ("5.2", "7.0")],
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default=DEFAULT_VERSION)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    todo = [{"argv": ["$MODEL", *words], "config": CONFIGS[m], "model": m, "hardware": {"count": 8, **GPUS[cc]}}
            for m, cc, words in LAUNCHES]
    print(f"{len(todo)} launches; running real vLLM", flush=True)
    out = run_all(todo, args.version, args.jobs, ("model", "config", "hardware"))
    write_cases("capability", args.version, out, "capability_cases.py")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
