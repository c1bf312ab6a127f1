"""Values vLLM computes before its guards (kb/checks/computed.py), on small configs and GPUs; and
the digests that keep another release's arithmetic from being applied (kb/config/computed.py)."""

from __future__ import annotations

import ast
from typing import Any

import pytest

from kb.checks.computed import GIB, MODELLED, NEEDS, Hardware, compute, modelled, rope_parameters
from kb.config.computed import digest, followed_digests, max_len_overrides
from kb.config.modules import Modules
from kb.configmodel import ConfigModel
from kb.hardware import gpu

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "max_position_embeddings": 8192}
H100 = Hardware(80 * GIB, "NVIDIA H100 80GB HBM3", (9, 0))
A100 = Hardware(80 * GIB, "NVIDIA A100-SXM4-80GB", (8, 0))
L4 = Hardware(22.05 * GIB, "NVIDIA L4", (8, 9))
B200 = Hardware(178.4 * GIB, "NVIDIA B200", (10, 0))
DEFAULTS = {"performance_mode": "balanced", "runner": "auto", "convert": "auto", "data_parallel_size": 1,
            "enable_expert_parallel": False, "all2all_backend": "allgather_reducescatter"}


def model_of(followed: dict[str, str] | None = None, overrides: tuple[str, ...] = ()) -> ConfigModel:
    have = followed if followed is not None else {f: sorted(d)[0] for f, d in MODELLED.items()}
    return ConfigModel((), (), None, (), followed=tuple(sorted(have.items())), max_len_overrides=overrides)


def values(flags: dict[str, Any], config: dict[str, Any] = LLAMA, hardware: Hardware = H100,
           model: ConfigModel | None = None) -> dict[str, Any]:
    got = compute(model or model_of(), flags, DEFAULTS, config, hardware)
    return {**got.values, **{k: f"missing: {v}" for k, v in got.missing.items()}}


def test_max_model_len_follows_the_keys_rope_scaling_and_model_max_length() -> None:
    assert values({})["max_model_len"] == 8192
    assert values({"max_model_len": 4096})["max_model_len"] == 4096
    assert values({"max_model_len": -1})["max_model_len"] == 8192  # -1: derived now, fitted to memory later
    linear = {**LLAMA, "max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 4.0}}
    assert values({}, linear)["max_model_len"] == 16384
    dynamic = {**LLAMA, "rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e4}}
    assert values({}, dynamic)["max_model_len"] == 16384
    for unscaled in ("llama3", "yarn", "longrope"):  # the factor of these is already in the length
        cfg = {**LLAMA, "rope_scaling": {"rope_type": unscaled, "factor": 8.0}}
        assert values({}, cfg)["max_model_len"] == 8192
    # LongRoPE by default: the config's own original_max_position_embeddings (Phi-3), not the scaled one
    phi3 = {**LLAMA, "original_max_position_embeddings": 1024, "rope_scaling": {"type": "longrope", "long_factor": [1]}}
    assert values({}, phi3)["max_model_len"] == 1024
    assert values({"max_model_len": 4096}, phi3)["max_model_len"] == 4096
    assert values({}, {**LLAMA, "model_type": "gemma3_text", "rope_scaling": {"rope_type": "linear", "factor": 8.0}}
                  )["max_model_len"] == 8192  # Gemma 3's length is scaled already
    assert values({}, {**LLAMA, "n_positions": 2048})["max_model_len"] == 2048  # the smallest key wins
    assert values({}, {**LLAMA, "model_max_length": 16384})["max_model_len"] == 16384  # ... but model_max_length
    mm = {"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava",
          "text_config": {"model_type": "llama", "max_position_embeddings": 4096}}
    assert values({}, mm)["max_model_len"] == 4096  # the text model's


def test_max_model_len_is_missing_where_vllm_reads_more_than_config_json() -> None:
    assert values({}, {"architectures": ["LlamaForCausalLM"], "model_type": "llama"})["max_model_len"].startswith(
        "missing: max_model_len: config.json gives none of")  # transformers' class default
    assert "pooling" in values({}, {**LLAMA, "architectures": ["BertModel"]})["max_model_len"]
    assert "pooling" in values({"runner": "pooling"})["max_model_len"]
    assert "its own way" in values({}, {**LLAMA, "model_type": "odd"}, model=model_of(overrides=("odd",)))[
        "max_model_len"]
    assert values({}, {**LLAMA, "rope_scaling": {"type": "linear", "factor": "x"}})["max_model_len"].startswith("missing")


def test_batch_defaults_per_gpu_as_get_batch_defaults_picks_them() -> None:
    got = {name: (v["max_num_batched_tokens"], v["max_num_seqs"])
           for name, hw in (("h100", H100), ("a100", A100), ("l4", L4), ("b200", B200))
           for v in [values({}, hardware=hw)]}
    assert got == {"h100": (8192, 1024), "a100": (2048, 256), "l4": (2048, 256), "b200": (16384, 1024)}
    gb10 = Hardware(120 * GIB, "NVIDIA GB10", (12, 1))
    assert values({}, hardware=gb10)["max_num_batched_tokens"] == 2048  # DGX Spark stays on the small tier
    assert values({"performance_mode": "throughput"})["max_num_batched_tokens"] == 16384  # doubled when unset
    assert values({"performance_mode": "throughput", "max_num_seqs": 8})["max_num_seqs"] == 8
    # max_num_seqs given: the token default stays, capped by max_num_seqs * max_model_len
    assert values({"max_num_seqs": 4096}, hardware=A100)["max_num_batched_tokens"] == 2048
    assert values({"max_num_seqs": 1, "max_model_len": 512})["max_num_batched_tokens"] == 512
    # chunked prefill off: at least max_model_len; max_num_seqs is then capped by the token budget
    off = values({"enable_chunked_prefill": False, "max_model_len": 20000}, hardware=L4)
    assert (off["max_num_batched_tokens"], off["max_num_seqs"]) == (20000, 256)
    assert values({"max_num_batched_tokens": 100})["max_num_seqs"] == 100
    batched_dp = {"all2all_backend": "deepep_low_latency", "enable_expert_parallel": True, "data_parallel_size": 2}
    assert values(batched_dp)["max_num_batched_tokens"] == 256


def test_batch_defaults_say_which_gpu_fact_they_need() -> None:
    assert "--gpu" in values({}, hardware=Hardware())["max_num_batched_tokens"]
    assert "name" in values({}, hardware=Hardware(80 * GIB))["max_num_batched_tokens"]  # an A100 or not
    assert values({}, hardware=Hardware(40 * GIB))["max_num_batched_tokens"] == 2048  # small either way
    both = values({"max_num_batched_tokens": 4, "max_num_seqs": 2}, hardware=Hardware())
    assert (both["max_num_batched_tokens"], both["max_num_seqs"]) == (4, 2)  # given: nothing to compute
    mm = {**LLAMA, "architectures": ["LlavaForConditionalGeneration"], "is_encoder_decoder": False,
          "vision_config": {}}
    assert "multimodal" in values({}, mm)["max_num_batched_tokens"]


def test_chunked_prefill_default_and_encoder_decoder_models() -> None:
    assert values({})["enable_chunked_prefill"] is True
    assert values({"enable_chunked_prefill": False})["enable_chunked_prefill"] is False
    assert values({})["is_encoder_decoder"] is False  # a *ForCausalLM model
    whisper = {"architectures": ["WhisperForConditionalGeneration"], "model_type": "whisper", "is_encoder_decoder": True,
               "max_target_positions": 448}
    got = values({}, whisper)
    assert got["is_encoder_decoder"] is True and got["enable_chunked_prefill"] is False  # not supported there
    assert values({"enable_chunked_prefill": True}, whisper)["enable_chunked_prefill"] is True  # given: kept
    said_null = {**whisper, "is_encoder_decoder": None}  # config.json says null: getattr gives None, falsy
    assert values({}, said_null)["is_encoder_decoder"] is False
    no_word = {k: v for k, v in whisper.items() if k != "is_encoder_decoder"}
    got = values({}, no_word)  # transformers' WhisperConfig says it, config.json does not
    assert got["is_encoder_decoder"].startswith("missing") and got["enable_chunked_prefill"].startswith("missing")


def test_another_releases_functions_are_not_computed() -> None:
    changed = {f: sorted(d)[0] for f, d in MODELLED.items()} | {"EngineArgs.get_batch_defaults": "0" * 16}
    model = model_of(changed)
    assert modelled(model, "max_model_len") and not modelled(model, "max_num_batched_tokens")
    got = values({}, model=model)
    assert got["max_model_len"] == 8192
    assert got["max_num_batched_tokens"].startswith("missing: max_num_batched_tokens: this release")
    assert not modelled(model_of({}), "max_model_len")  # a tree without the functions
    assert set(NEEDS["max_num_seqs"]) <= set(MODELLED)


def test_rope_parameters_nested_per_layer_type() -> None:
    nested = {"rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 2.0},
                                  "sliding_attention": {"rope_type": "default"}}}
    assert rope_parameters(nested) == [{"rope_type": "linear", "factor": 2.0}, {"rope_type": "default"}]
    assert rope_parameters({}) == [{"rope_type": "default"}]


def _tree(files: dict[str, str]) -> Modules:
    return Modules(sorted(files), lambda p: files[p].encode())


def test_digests_of_a_tree_ignore_comments_and_lines_and_overrides_follow_bases() -> None:
    src = "class EngineArgs:\n    def get_batch_defaults(cls, world_size):\n        return 1\n"
    moved = "\n\n# a comment\nclass EngineArgs:\n    def get_batch_defaults(cls, world_size):  # c\n        return 1\n"
    a = dict(followed_digests(_tree({"vllm/engine/arg_utils.py": src})))
    b = dict(followed_digests(_tree({"vllm/engine/arg_utils.py": moved})))
    assert a == b and list(a) == ["EngineArgs.get_batch_defaults"]
    assert a["EngineArgs.get_batch_defaults"] == digest(ast.parse(src).body[0].body[0])  # type: ignore[attr-defined]
    changed = dict(followed_digests(_tree({"vllm/engine/arg_utils.py": src.replace("1", "2")})))
    assert changed != a
    conv = ("class ModelArchConfigConvertorBase:\n    def derive_max_model_len_and_key(self): pass\n"
            "class A(ModelArchConfigConvertorBase):\n    def derive_max_model_len_and_key(self): pass\n"
            "class B(A): pass\nclass C(ModelArchConfigConvertorBase): pass\n"
            "MODEL_ARCH_CONFIG_CONVERTORS = {'b': B, 'c': C, 'a': A, 1: A}\n")
    assert max_len_overrides(_tree({"vllm/transformers_utils/model_arch_config_convertor.py": conv})) == ("a", "b")


def test_gpu_table_names() -> None:
    h100 = gpu("H100")
    assert h100 is not None and h100.memory_gib > 70 and h100.capability == (9, 0)
    assert gpu("NVIDIA A100-SXM4-80GB") == gpu("a100")
    assert gpu("RTX 4090") == gpu("4090") and gpu("nvidia geforce rtx 4090") is not None
    assert gpu("no such gpu") is None


@pytest.mark.parametrize("cc,expected", [(9.0, (9, 0)), (12.1, (12, 1)), (8.9, (8, 9)), (None, None)])
def test_hardware_of_kb_checks_options(cc: float | None, expected: tuple[int, int] | None) -> None:
    hw = Hardware.of({"gpu_memory_gib": 80, "gpu_name": "X", "compute_capability": cc})
    assert hw.capability == expected and hw.memory_bytes == 80 * GIB and hw.name == "X"
