"""The one vocabulary of check inputs: every name a check may read, and where its value comes
from before a launch: a `vllm serve` flag, a key of the model's config.json, or a hardware fact.

`default` is the value vLLM uses when the flag or key is absent (None is a real value: "not
set"); UNKNOWN means vLLM derives it at run time (e.g. from free GPU memory), so a check that
needs it is skipped unless the user gives it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

UNKNOWN = object()
# physical bounds of the hardware facts: a value past them is a typo or an attack, never a GPU
MAX_GPUS = 1_000_000  # GPUs on one node
MAX_GPU_GIB = 1_000_000.0  # memory of one GPU, GiB (2026's largest: under 300)
MAX_CAPABILITY = 100.0  # CUDA compute capability (2026: 12.x)


@dataclass(frozen=True)
class Input:
    name: str
    kind: str  # flag, config, hardware
    doc: str
    flags: tuple[str, ...] = ()  # long option first, then aliases
    paths: tuple[str, ...] = ()  # config.json key paths, first present wins
    default: Any = UNKNOWN
    type: str = "str"  # int, float, str, bool, size; present: a config.json input true when any of its keys is there
    json_key: Optional[tuple[str, str]] = None  # (flag, key): also read from a JSON flag, e.g. --speculative-config
    fallback: Optional[str] = None  # another input whose value stands in when this one is absent
    minimum: Optional[float] = None  # the smallest value that means anything (a count of GPUs, of heads)
    maximum: Optional[float] = None  # a physical bound (no GPU has a million GiB); else MAX_NUMBER
    beside: tuple[str, ...] = ()  # a config input true when one of these files sits beside config.json


def _flag(name: str, doc: str, *aliases: str, default: Any = UNKNOWN, type: str = "str",
          json_key: Optional[tuple[str, str]] = None, fallback: Optional[str] = None,
          minimum: Optional[float] = None) -> Input:
    return Input(name, "flag", doc, ("--" + name.replace("_", "-"), *aliases), default=default, type=type,
                 json_key=json_key, fallback=fallback, minimum=minimum)


def _config(name: str, doc: str, *paths: str, default: Any = UNKNOWN, type: str = "int",
            fallback: Optional[str] = None, minimum: Optional[float] = None) -> Input:
    return Input(name, "config", doc, paths=paths or (name, f"text_config.{name}"), default=default, type=type,
                 fallback=fallback, minimum=minimum)


INPUTS: dict[str, Input] = {i.name: i for i in [
    # --- vllm serve flags ------------------------------------------------------------------------
    _flag("tensor_parallel_size", "GPUs each model replica is split across", "-tp", default=1, type="int", minimum=1),
    _flag("pipeline_parallel_size", "pipeline stages", "-pp", default=1, type="int", minimum=1),
    _flag("data_parallel_size", "model replicas (data parallel ranks)", "-dp", default=1, type="int", minimum=1),
    _flag("decode_context_parallel_size", "decode context parallel size (DCP)", "-dcp", default=1, type="int", minimum=1),
    _flag("prefill_context_parallel_size", "prefill context parallel size (PCP)", "-pcp", default=1, type="int", minimum=1),
    _flag("enable_expert_parallel", "expert parallelism for MoE layers", "-ep", default=False, type="bool"),
    _flag("enable_eplb", "expert-parallel load balancing", default=False, type="bool"),
    Input("num_redundant_experts", "flag", "redundant experts for EPLB (a key of --eplb-config)",
          ("--eplb-config.num_redundant_experts",), default=0, type="int",
          json_key=("--eplb-config", "num_redundant_experts"), minimum=0),
    _flag("nnodes", "nodes the launch spans", "-n", default=1, type="int", minimum=1),
    _flag("data_parallel_backend", "data-parallel backend (mp or ray)", "-dpb", default="mp"),
    _flag("distributed_executor_backend", "executor backend (mp, ray, uni, external_launcher)", default=None),
    _flag("data_parallel_external_lb", "external load balancing across DP ranks", "-dpe", default=False, type="bool"),
    _flag("data_parallel_rank", "this instance's DP rank (external LB)", "-dpn", default=None, type="int", minimum=0),
    _flag("max_model_len", "maximum context length; default: the model's max_position_embeddings (RoPE scaling "
          "and sliding windows not modelled)", type="size", fallback="max_position_embeddings"),
    _flag("max_num_batched_tokens", "token budget per scheduler step; default depends on GPU memory", type="int", minimum=1),
    _flag("max_num_seqs", "sequences per scheduler step; default depends on GPU memory", type="int", minimum=1),
    _flag("enable_chunked_prefill", "chunked prefill; on for generative decoder models", default=True, type="bool"),
    _flag("dtype", "model weight and activation dtype", default="auto"),
    _flag("quantization", "quantization method; default: the checkpoint's", "-q", default=None),
    _flag("allow_deprecated_quantization", "allow deprecated quantization methods", default=False, type="bool"),
    _flag("enable_lora", "serve LoRA adapters", default=False, type="bool"),
    _flag("max_loras", "LoRA adapters in one batch", default=1, type="int", minimum=1),
    _flag("max_cpu_loras", "LoRA adapters kept in CPU memory; default max_loras", default=None, type="int"),
    _flag("max_lora_rank", "largest LoRA rank served", default=16, type="int", minimum=1),
    _flag("moe_backend", "MoE kernel backend", default="auto"),
    _flag("spec_method", "speculative decoding method (or `method` of --speculative-config)", default=None,
          json_key=("--speculative-config", "method")),
    _flag("spec_model", "draft model (or `model` of --speculative-config)", default=None,
          json_key=("--speculative-config", "model")),
    _flag("spec_tokens", "speculative tokens (or `num_speculative_tokens` of --speculative-config)", default=None,
          type="int", json_key=("--speculative-config", "num_speculative_tokens")),
    _flag("mm_processor_cache_type", "multimodal processor cache (lru or shm)", default="lru"),
    _flag("mm_shm_cache_max_object_size_mb", "largest object in the shm multimodal cache", default=128, type="int"),
    _flag("mm_encoder_attn_dtype", "multimodal encoder attention dtype", default=None),
    _flag("mm_encoder_fp8_scale_path", "FP8 scales file for the multimodal encoder", default=None),
    _flag("mm_encoder_fp8_scale_save_path", "where to save calibrated FP8 encoder scales", default=None),
    _flag("gpu_memory_utilization", "share of GPU memory vLLM may use", default=0.92, type="float"),
    # --- config.json keys ------------------------------------------------------------------------
    _config("num_attention_heads", "attention (query) heads", minimum=1),
    _config("num_key_value_heads", "KV heads; absent means one per attention head (MHA)", "num_key_value_heads",
            "n_head_kv", "num_kv_heads", "multi_query_group_num", "num_attention_groups",
            "text_config.num_key_value_heads", fallback="num_attention_heads", minimum=1),
    _config("kv_lora_rank", "MLA latent rank (DeepSeek-style models); 0 when absent", default=0, minimum=0),
    _config("num_experts", "routed experts of a MoE model; 0 when absent", "num_experts", "moe_num_experts",
            "n_routed_experts", "num_local_experts", "text_config.num_experts", default=0, minimum=0),
    _config("max_position_embeddings", "the model's context length", minimum=1),
    # get_quant_config's standalone files (AWQ, GPTQ and moe_wna16, ModelOpt, INC: get_config_filenames)
    Input("quant_config_file", "config", "a quantization config file in the model folder (quantize_config.json, "
          "quant_config.json, hf_quant_config.json or quantization_config.json), where vLLM looks when config.json "
          "has no quantization_config", type="bool",
          beside=("quantize_config.json", "quant_config.json", "hf_quant_config.json", "quantization_config.json")),
    # no key of its own: kb check computes it from config.json as vLLM does (kb/checks/computed.py)
    Input("derived_max_model_len", "config", "the context length vLLM derives from config.json (the smallest "
          "length key, model_max_length, RoPE scaling)", type="float", minimum=1),
    _config("intermediate_size", "MLP width", minimum=1),
    _config("hidden_size", "hidden width", minimum=1),
    _config("num_hidden_layers", "layers", minimum=1),
    _config("model_type", "the model type", "model_type", type="str"),
    _config("quant_method", "the checkpoint's quantization method; None when not quantized",
            "quantization_config.quant_method", "compression_config.quant_method",
            "text_config.quantization_config.quant_method", default=None, type="str"),
    _config("is_multimodal", "a multimodal model (vLLM builds MultiModalConfig); kb reads it from a vision or audio "
            "part of config.json, where vLLM asks its model registry", "vision_config", "audio_config", "speech_config",
            "vision_tower", "mm_vision_tower", "visual", "image_token_index", "image_token_id", default=False,
            type="present"),
    _config("group_size", "quantization group size", "quantization_config.group_size",
            "quantization_config.q_group_size", "quantization_config.global_quant_config.weight.group_size",
            default=None),
    # --- hardware --------------------------------------------------------------------------------
    Input("gpu_count", "hardware", "GPUs visible on the launching node", ("--gpu-count",), type="int", minimum=0,
          maximum=MAX_GPUS),
    Input("compute_capability", "hardware", "the GPU's CUDA compute capability, e.g. 8.0", ("--compute-capability",),
          type="float", minimum=0, maximum=MAX_CAPABILITY),
    Input("gpu_memory_gib", "hardware", "memory of one GPU in GiB", ("--gpu-memory-gib",), type="float", minimum=0,
          maximum=MAX_GPU_GIB),
]}


def parse_value(inp: Input, text: str) -> Any:
    """A flag's text as the type vLLM parses it to, checked as `checked_value` does; ValueError
    says what is wrong."""
    parsers: dict[str, Callable[[str], Any]] = {"int": int, "float": float, "str": str, "bool": _bool, "size": _size,
                                                "present": _bool}
    try:
        value = parsers[inp.type](text)
    except (ValueError, OverflowError):
        raise ValueError(f"cannot read {text!r} as {_TYPE_NAMES[inp.type]}") from None
    return checked_value(inp, value)


_TYPE_NAMES = {"int": "an integer", "size": "an integer", "float": "a number", "str": "a string", "bool": "a boolean",
               "present": "a boolean"}


def checked_value(inp: Input, value: Any) -> Any:
    """`value` (from config.json, a JSON flag or the hardware options) when it has the input's
    type, is finite and is not below its minimum; else ValueError saying what is wrong. None
    stands for "not set" and passes."""
    if value is None:
        return value
    if inp.type in ("int", "size"):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif inp.type == "float":
        # an int of any size is finite (math.isfinite would convert it to a float: OverflowError past 1e308)
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and (
            isinstance(value, int) or math.isfinite(value))
    elif inp.type in ("bool", "present"):
        ok = isinstance(value, bool)
    else:
        ok = isinstance(value, str)
    if not ok:
        wanted = "a finite number" if isinstance(value, float) and inp.type == "float" else _TYPE_NAMES[inp.type]
        raise ValueError(f"expected {wanted}, got {shown_value(value)}")
    if inp.minimum is not None and value < inp.minimum:
        raise ValueError(f"must be at least {inp.minimum:g}, got {shown_value(value)}")
    if isinstance(value, (int, float)) and abs(value) > MAX_NUMBER:
        raise ValueError(f"out of range (more than 2**63), got {shown_value(value)}")
    if inp.maximum is not None and value > inp.maximum:
        raise ValueError(f"must be at most {inp.maximum:g}, got {shown_value(value)}")
    if isinstance(value, str) and len(value) > MAX_TEXT:
        raise ValueError(f"longer than {MAX_TEXT} characters, got {shown_value(value)}")
    return value


MAX_NUMBER = 2**63  # no count or size of a launch comes near; beyond it arithmetic only costs time
MAX_TEXT = 10_000  # a dtype, a method name, a file path


def shown_value(value: Any) -> str:
    """A value as the message quotes it, cut short: it may come from a hostile file."""
    if isinstance(value, dict):
        return "a JSON object"
    if isinstance(value, list):
        return "a JSON array"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_NUMBER:
        return f"an integer of {len(str(abs(value)))} digits"
    text = json.dumps(value[:100] if isinstance(value, str) else value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {text!r}")


def _size(text: str) -> int:
    """--max-model-len as vLLM reads it: `1k` / `25.6k` are thousands, `32K` is 32 x 1024, `auto` -1."""
    import argparse

    from kb.checks.cli_parse import human_readable_int_or_auto

    try:
        return human_readable_int_or_auto(text)
    except argparse.ArgumentTypeError as e:
        raise ValueError(str(e)) from None


def flag_index() -> dict[str, Input]:
    """Every long flag and alias -> its input."""
    out: dict[str, Input] = {}
    for inp in INPUTS.values():
        if inp.kind == "flag":
            for f in inp.flags:
                out[f] = inp
    return out


def config_value(inp: Input, config: dict[str, Any]) -> tuple[str, Any]:
    """The first of the input's key paths present (and not null) in config.json, and its value;
    UNKNOWN when none is. For a `present` input, whether any is (True or False, never UNKNOWN)."""
    if inp.type == "present":
        found = next((p for p in inp.paths if config_value(Input(p, "config", "", paths=(p,)), config)[1] is not UNKNOWN),
                     "")
        return found or inp.paths[0], bool(found)
    for path in inp.paths:
        node: Any = config
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                node = UNKNOWN
                break
            node = node[part]
        if node is not UNKNOWN and node is not None:
            return path, node
    return "", UNKNOWN
