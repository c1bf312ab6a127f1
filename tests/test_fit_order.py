"""kb fit reports vLLM's first failure only, in the order the release's startup reaches its steps,
read from its source (kb/config/startup.py): a small tree whose order is swapped gives the swapped
order, and the failure kb reports follows it."""

from __future__ import annotations

import textwrap
from dataclasses import replace
from pathlib import Path

from kb.config.modules import Modules
from kb.config.startup import startup_order
from kb.fit.follow import Rules
from kb.fit.memory import GIB, FitInput, compute
from kb.fit.shape import shape_of

ENGINE = """
class EngineCore:
    def __init__(self, vllm_config, executor_class):
        {first}
        {second}

    def _initialize_kv_caches(self, vllm_config):
        available = self.model_executor.determine_available_memory()
        configs = get_kv_cache_configs(vllm_config, available)
        self.model_executor.compile_or_warm_up_model()
        finalize_extensible_kv_cache(vllm_config, configs)
"""
FILES = {
    "vllm/v1/executor/abstract.py": """
class Executor:
    def __init__(self, vllm_config):
        self._init_executor()
""",
    "vllm/v1/executor/uniproc_executor.py": """
class UniProcExecutor(Executor):
    def _init_executor(self):
        self.driver_worker.init_device()
        self.driver_worker.load_model()
""",
    "vllm/v1/worker/gpu_worker.py": """
class Worker:
    def init_device(self):
        self.requested_memory = request_memory(self.init_snapshot, self.cache_config)
""",
}
EXECUTOR = "self.model_executor = executor_class(vllm_config)"
KV = "self._initialize_kv_caches(vllm_config)"
LLAMA_70B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192,
             "num_attention_heads": 64, "num_key_value_heads": 8, "num_hidden_layers": 80,
             "intermediate_size": 28672, "vocab_size": 128256, "torch_dtype": "bfloat16",
             "max_position_embeddings": 131072}


def _tree(tmp_path: Path, first: str, second: str) -> Modules:
    files = {**FILES, "vllm/v1/engine/core.py": ENGINE.format(first=first, second=second)}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text))
    return Modules(sorted(files), lambda p: (tmp_path / p).read_bytes())


def test_the_startup_order_is_read_from_the_source(tmp_path: Path) -> None:
    steps = startup_order(_tree(tmp_path / "a", EXECUTOR, KV))
    assert [s for s, _, _ in steps] == ["request_memory", "load_model", "determine_available_memory",
                                       "get_kv_cache_configs", "compile_or_warm_up_model",
                                       "finalize_extensible_kv_cache"]
    assert steps[0][1:] == ("vllm/v1/worker/gpu_worker.py", 4) and steps[1][1:] == ("vllm/v1/executor/uniproc_executor.py", 5)
    swapped = startup_order(_tree(tmp_path / "b", KV, EXECUTOR))  # a release that sizes the KV cache first
    assert [s for s, _, _ in swapped][:2] == ["determine_available_memory", "get_kv_cache_configs"]
    assert [s for s, _, _ in swapped][-2:] == ["request_memory", "load_model"]
    assert startup_order(_tree(tmp_path / "c", KV, "pass")) == swapped[:4]  # no executor: its steps left out


def test_70b_on_one_gpu_fails_loading_the_weights_and_reaches_no_kv_cache_check() -> None:
    """Llama-3.1-70B in bf16, -tp 1, one 80 GB GPU: vLLM fails with CUDA out of memory while loading
    the weights; "No available memory for the cache blocks" is never reached (kb said both)."""
    inp = FitInput(shape_of(LLAMA_70B), 79.19 * GIB, True, max_model_len=131072, utilization=1.0, extensible=True)
    fit = compute(inp)
    assert [e.key for e in fit.errors] == ["weights"]
    assert "CUDA out of memory" in fit.errors[0].note and "131.42 GiB" in fit.errors[0].note
    assert fit.not_reached == ("determine_available_memory", "get_kv_cache_configs", "compile_or_warm_up_model",
                               "finalize_extensible_kv_cache")
    # the same launch in a release whose startup checked the KV cache before loading: that check first
    rules = Rules(False, 16, 0.92, 0.75, "", (), (("get_kv_cache_configs", "core.py", 1), ("load_model", "u.py", 2)))
    other = compute(replace(inp, rules=rules))
    assert [e.key for e in other.errors] == ["no-memory"] and other.not_reached == ("load_model",)


def test_weights_that_load_leave_the_kv_cache_check_to_fail() -> None:
    """Loading fails above the GPU's free memory, not above --gpu-memory-utilization's share: 60 of
    80 GiB load at 0.5, and the KV cache check fails next."""
    s = shape_of({**LLAMA_70B, "num_hidden_layers": 36})
    fit = compute(FitInput(s, 80 * GIB, True, max_model_len=8192, utilization=0.5))
    assert 40 * GIB < fit.weights.value < 80 * GIB
    assert [e.key for e in fit.errors] == ["no-memory"] and fit.not_reached == ("compile_or_warm_up_model",)
    busy = compute(FitInput(s, 80 * GIB, True, max_model_len=8192, memory_used_elsewhere=30 * GIB))
    assert [e.key for e in busy.errors] == ["free-memory"] and busy.not_reached[0] == "load_model"
