"""Values vLLM computes before its guards, from the launch, the model's config.json and the GPU,
following vLLM 0.33.0's own functions step by step (each step cites the function it follows):

- `max_model_len`: `ModelConfig.get_and_verify_max_len` -> `_get_and_verify_max_len`
  (vllm/config/model.py), over `ModelArchConfigConvertorBase.derive_max_model_len_and_key`
  (vllm/transformers_utils/model_arch_config_convertor.py) and `iter_rope_parameters`
  (vllm/transformers_utils/config.py);
- `enable_chunked_prefill`: `EngineArgs._set_default_chunked_prefill_and_prefix_caching_args`
  with `ModelConfig.is_chunked_prefill_supported`;
- `max_num_batched_tokens`, `max_num_seqs`: `EngineArgs._set_default_max_num_seqs_and_batched_tokens_args`
  and `EngineArgs.get_batch_defaults` (vllm/engine/arg_utils.py) for `vllm serve`
  (`UsageContext.OPENAI_API_SERVER`) on a CUDA GPU.

A release is computed only when every function followed has the digest of a release this module
was checked against (`MODELLED`, against kb.config.computed's digests of the tree): another
release's arithmetic is never applied to it. A value kb cannot tell (a key config.json leaves to
transformers' defaults, a pooling model, the GPU not given) is missing, with the input it needs."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from kb.checks.vocab import INPUTS, MAX_NUMBER, config_value
from kb.configmodel import ConfigModel

GIB = 1 << 30
# (function -> digests of kb.config.computed.digest) of the releases this module follows exactly
MODELLED: dict[str, frozenset[str]] = {
    "EngineArgs.get_batch_defaults": frozenset({"d0a518871ac32e1a"}),
    "EngineArgs._set_default_max_num_seqs_and_batched_tokens_args": frozenset({"06d3f973969b7d78"}),
    "EngineArgs._set_default_chunked_prefill_and_prefix_caching_args": frozenset({"d39482ac21cdeab6"}),
    "ModelConfig.get_and_verify_max_len": frozenset({"ec194ad0a4fcbdde"}),
    "ModelConfig.is_chunked_prefill_supported": frozenset({"e2def50c20b9c21e"}),
    "_get_and_verify_max_len": frozenset({"64fb9db014aa7839"}),
    "ParallelConfig.use_batched_dp_moe": frozenset({"cea33640079a2d2a"}),
    "ModelArchConfigConvertorBase.derive_max_model_len_and_key": frozenset({"8f3354aa235433b1"}),
    "iter_rope_parameters": frozenset({"38776dbbb803d29b"}),
    "is_encoder_decoder": frozenset({"4e3ed550b4642ede"}),
    "ModelConfig.is_encoder_decoder": frozenset({"13a833dd385e912e"}),
}
# the value -> the functions its computation follows
NEEDS: dict[str, tuple[str, ...]] = {
    "is_encoder_decoder": ("ModelConfig.is_encoder_decoder", "is_encoder_decoder"),
    "max_model_len": ("ModelConfig.get_and_verify_max_len", "_get_and_verify_max_len",
                      "ModelArchConfigConvertorBase.derive_max_model_len_and_key", "iter_rope_parameters"),
    "enable_chunked_prefill": ("EngineArgs._set_default_chunked_prefill_and_prefix_caching_args",
                               "ModelConfig.is_chunked_prefill_supported", "ModelConfig.is_encoder_decoder",
                               "is_encoder_decoder"),
}
NEEDS["derived_max_model_len"] = NEEDS["max_model_len"]
NEEDS["max_num_batched_tokens"] = (*NEEDS["max_model_len"], *NEEDS["enable_chunked_prefill"],
                                   "EngineArgs._set_default_max_num_seqs_and_batched_tokens_args",
                                   "EngineArgs.get_batch_defaults", "ParallelConfig.use_batched_dp_moe")
NEEDS["max_num_seqs"] = NEEDS["max_num_batched_tokens"]
# ModelConfig properties computed here, as guards read them (`model_config.is_encoder_decoder`)
COMPUTED_PROPERTIES = ("is_encoder_decoder",)
# where vLLM sets each value before its guards, as kb.config.order records the assignments
# (class, method): the computation covers them all (what a config's own __post_init__ changes
# after, kb/checks/derive.py reads with its condition)
SET_IN: dict[str, tuple[tuple[str, str], ...]] = {
    "max_model_len": (("ModelConfig", "__post_init__"),),
    "enable_chunked_prefill": (("EngineArgs", "_set_default_chunked_prefill_and_prefix_caching_args"),),
    "max_num_batched_tokens": (("EngineArgs", "_set_default_max_num_seqs_and_batched_tokens_args"),),
    "max_num_seqs": (("EngineArgs", "_set_default_max_num_seqs_and_batched_tokens_args"),),
}
# derive_max_model_len_and_key: the keys read, smallest wins
MAX_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
                "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")
# _get_and_verify_max_len: RoPE types whose `factor` is not applied to the derived length
UNSCALED_ROPE = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")
# architectures vLLM runs as generative models when --runner is auto (the name's ending)
GENERATIVE_ENDINGS = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")
# SchedulerConfig's class constants
DEFAULT_MAX_NUM_BATCHED_TOKENS_FOR_BATCHED_DP = 256


@dataclass(frozen=True)
class Hardware:
    """The GPU as vLLM's platform reports it; None where the launch does not say."""

    memory_bytes: Optional[float] = None
    name: Optional[str] = None
    capability: Optional[tuple[int, int]] = None

    @staticmethod
    def of(given: Optional[Mapping[str, Any]]) -> Hardware:
        """From `kb check`'s hardware (`gpu_memory_gib`, `gpu_name`, `compute_capability` as 9.0)."""
        given = given or {}
        memory, name, cc = given.get("gpu_memory_gib"), given.get("gpu_name"), given.get("compute_capability")
        capability = None
        if isinstance(cc, (int, float)) and not isinstance(cc, bool) and math.isfinite(cc) and cc >= 0:
            major = int(cc)
            capability = (major, round((cc - major) * 10))
        return Hardware(float(memory) * GIB if isinstance(memory, (int, float)) and not isinstance(memory, bool)
                        else None, name if isinstance(name, str) else None, capability)


@dataclass(frozen=True)
class Computed:
    values: Mapping[str, Any] = field(default_factory=dict)
    missing: Mapping[str, str] = field(default_factory=dict)  # value -> what kb needs to compute it


class _Missing(Exception):
    pass


def modelled(model: ConfigModel, value: str) -> bool:
    """The tree's functions behind `value` are those this module follows (and the tree has them)."""
    have = dict(model.followed)
    return bool(have) and all(have.get(f) in MODELLED.get(f, ()) for f in NEEDS[value])


def compute(model: ConfigModel, flags: Mapping[str, Any], defaults: Mapping[str, Any], config: Mapping[str, Any],
            hardware: Hardware) -> Computed:
    """Every value of NEEDS that this tree's functions allow, as vLLM computes it for this launch."""
    def flag(dest: str) -> Any:
        return flags[dest] if dest in flags else defaults.get(dest)

    values: dict[str, Any] = {}
    missing: dict[str, str] = {}
    steps = (("is_encoder_decoder", lambda: encoder_decoder(config)),
             ("derived_max_model_len", lambda: derived_length(model, flag, config)),
             ("max_model_len", lambda: max_model_len(model, flag, config)),
             ("enable_chunked_prefill", lambda: chunked_prefill(flag, config, values)),
             ("max_num_batched_tokens", lambda: batch_default(0, flag, values, config, hardware)),
             ("max_num_seqs", lambda: batch_default(1, flag, values, config, hardware)))
    for name, step in steps:
        if not modelled(model, name):
            missing[name] = f"{name}: this release computes it with functions kb does not follow"
            continue
        try:
            values[name] = step()
        except _Missing as e:
            missing[name] = str(e)
    return Computed(values, missing)


def text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """hf_text_config: a multimodal config's `text_config`, else the config itself."""
    sub = config.get("text_config")
    return sub if isinstance(sub, dict) else config


def _generative(flag: Any, config: Mapping[str, Any]) -> bool:
    runner, convert = flag("runner") or "auto", flag("convert") or "auto"
    if runner == "generate" and convert in ("auto", "none"):
        return True
    archs = config.get("architectures")
    return runner == "auto" and convert in ("auto", "none") and isinstance(archs, list) and bool(archs) and \
        all(isinstance(a, str) and a.endswith(GENERATIVE_ENDINGS) for a in archs)


def rope_parameters(text: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """iter_rope_parameters over the config transformers makes of config.json: `rope_parameters`
    (nested per layer type or not), else the legacy `rope_scaling` with `type` read as `rope_type`;
    transformers gives a config without either the `default` type, which has no factor."""
    rp = text.get("rope_parameters")
    if not isinstance(rp, dict):
        legacy = text.get("rope_scaling")
        if not isinstance(legacy, dict):
            return [{"rope_type": "default"}]
        rp = {**legacy, "rope_type": legacy.get("rope_type", legacy.get("type", "default"))}
    if rp and all(isinstance(v, dict) for v in rp.values()):  # nested: one dict per layer type
        return [p for p in rp.values() if p]
    return [rp] if rp else []


def max_model_len(model: ConfigModel, flag: Any, config: Mapping[str, Any]) -> int:
    """ModelConfig.get_and_verify_max_len -> _get_and_verify_max_len (vllm/config/model.py): the
    given length (vLLM raises there when it is larger than the derived one), else the derived one."""
    given = flag("max_model_len")
    derived = derived_length(model, flag, config)
    if given is None or given == -1:
        params = rope_parameters(text_config(config))
        if any(rp.get("rope_type") == "longrope" for rp in params):
            original = text_config(config).get("original_max_position_embeddings", derived)
            if not _finite(original):
                raise _Missing("max_model_len: original_max_position_embeddings is not a number")
            return int(original)
        return int(derived)  # CudaPlatform.check_max_model_len returns it unchanged
    if not isinstance(given, int) or isinstance(given, bool):
        raise _Missing("max_model_len: --max-model-len is not a number")
    return given


def derived_length(model: ConfigModel, flag: Any, config: Mapping[str, Any]) -> float:
    """`derived_max_model_len` of _get_and_verify_max_len: what config.json allows, before the
    launch's --max-model-len (a float where the RoPE factor is, as vLLM prints it)."""
    if not _generative(flag, config):  # get_and_verify_max_len: a pooling model may read tokenizer_config.json
        raise _Missing("max_model_len: the model may be a pooling model, which reads tokenizer_config.json")
    text = text_config(config)
    model_type = text.get("model_type")
    if not isinstance(model_type, str):
        raise _Missing("max_model_len: config.json gives no model_type for the text model")
    if model_type in model.max_len_overrides or config.get("model_type") in model.max_len_overrides:
        raise _Missing(f"max_model_len: vLLM derives it its own way for model_type {model_type}")
    # derive_max_model_len_and_key: the smallest of the keys present; a truthy model_max_length wins
    present = [(text[k], k) for k in MAX_LEN_KEYS if _finite(text.get(k))]
    if not present:  # transformers' class defaults fill what config.json leaves out: not known here
        raise _Missing("max_model_len: config.json gives none of " + ", ".join(MAX_LEN_KEYS[:4]) + ", ...")
    derived: float = min(v for v, _ in present)
    if text.get("model_max_length"):
        derived = text["model_max_length"]
        if not _finite(derived):  # a string, a list, Infinity, a 400-digit integer: nothing kb can size with
            raise _Missing("max_model_len: config.json's model_max_length is not a number")
    # sliding window disabled by hand: bounded by the window (get_sliding_window: a window of 0 is None)
    window = text.get("sliding_window")
    if flag("disable_sliding_window") and isinstance(window, int) and window > 0:
        raise _Missing("max_model_len: --disable-sliding-window with a sliding window (transformers may drop it)")
    params = rope_parameters(text)
    if params and "gemma3" not in model_type:
        factor: Any = 1.0
        for rp in params:
            if rp.get("rope_type") not in UNSCALED_ROPE:
                factor = rp.get("factor", factor)
        if factor is None:
            factor = 1.0
        if not isinstance(factor, (int, float)) or isinstance(factor, bool) or not math.isfinite(factor):
            raise _Missing("max_model_len: config.json's RoPE factor is not a number")
        derived *= factor
    if not _finite(derived):
        raise _Missing("max_model_len: config.json's lengths are out of range")
    return derived


def _finite(value: Any) -> bool:
    """A number kb computes a length with: finite and at most MAX_NUMBER (config.json may hold
    Infinity, NaN or a 400-digit integer, which float arithmetic cannot take)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return abs(value) <= MAX_NUMBER if isinstance(value, int) else math.isfinite(value) and abs(value) <= MAX_NUMBER


def encoder_decoder(config: Mapping[str, Any]) -> bool:
    """is_encoder_decoder (vllm/transformers_utils/config.py): `is_encoder_decoder` of the config or
    of its text config. transformers' classes default it (WhisperConfig, T5Config say True), so a
    config.json that does not say it is known only for a decoder-only architecture."""
    said = [c.get("is_encoder_decoder") for c in (config, text_config(config)) if "is_encoder_decoder" in c]
    if said:
        return any(bool(s) for s in said)
    archs = config.get("architectures")
    if isinstance(archs, list) and archs and all(isinstance(a, str) and a.endswith(("ForCausalLM", "LMHeadModel"))
                                                 for a in archs):
        return False
    raise _Missing("is_encoder_decoder: config.json does not say it, and transformers' class for the model may")


def chunked_prefill(flag: Any, config: Mapping[str, Any], values: Mapping[str, Any]) -> bool:
    """_set_default_chunked_prefill_and_prefix_caching_args: unset, it is
    ModelConfig.is_chunked_prefill_supported: for a generative model, not an encoder-decoder one."""
    given = flag("enable_chunked_prefill")
    if given is not None:
        return bool(given)
    if not _generative(flag, config):
        raise _Missing("enable_chunked_prefill: vLLM's default for a pooling model depends on its pooler")
    if "is_encoder_decoder" not in values:
        raise _Missing("enable_chunked_prefill: vLLM's default depends on whether the model is an encoder-decoder one")
    return not values["is_encoder_decoder"]


def batch_default(which: int, flag: Any, values: Mapping[str, Any], config: Mapping[str, Any],
                  hardware: Hardware) -> int:
    """max_num_batched_tokens (0) or max_num_seqs (1): a given value is never changed."""
    given = flag(("max_num_batched_tokens", "max_num_seqs")[which])
    return int(given) if given is not None else batch_defaults(flag, values, config, hardware)[which]


def batch_defaults(flag: Any, values: Mapping[str, Any], config: Mapping[str, Any],
                   hardware: Hardware) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs): _set_default_max_num_seqs_and_batched_tokens_args
    with get_batch_defaults for UsageContext.OPENAI_API_SERVER on a CUDA GPU."""
    given_tokens, given_seqs = flag("max_num_batched_tokens"), flag("max_num_seqs")
    if given_tokens is not None and given_seqs is not None:
        return given_tokens, given_seqs
    if "max_model_len" not in values or "enable_chunked_prefill" not in values:
        raise _Missing("the default needs max_model_len and enable_chunked_prefill as vLLM computes them")
    memory = hardware.memory_bytes
    if memory is None:
        raise _Missing("vLLM's default depends on the GPU: give --gpu NAME or --gpu-memory-gib")
    name = (hardware.name or "").lower()
    if memory >= 160 * GIB:
        tokens, seqs = 16384, 1024
    elif memory >= 70 * GIB:
        if hardware.name is None or hardware.capability is None:
            raise _Missing("vLLM's default on a GPU of 70 GiB or more depends on its name (A100) and "
                           "capability (GB10): give --gpu NAME")
        tokens, seqs = (2048, 256) if "a100" in name or hardware.capability == (12, 1) else (8192, 1024)
    else:
        tokens, seqs = 2048, 256
    ep, dp = flag("enable_expert_parallel"), flag("data_parallel_size")
    batched_dp = flag("all2all_backend") in ("deepep_low_latency", "nixl_ep") and bool(ep) and \
        isinstance(dp, int) and dp > 1
    max_tokens = given_tokens if given_tokens is not None else (
        DEFAULT_MAX_NUM_BATCHED_TOKENS_FOR_BATCHED_DP if batched_dp else tokens)
    max_seqs = given_seqs if given_seqs is not None else seqs
    if flag("performance_mode") == "throughput":
        max_tokens = max_tokens * 2 if given_tokens is None else max_tokens
        max_seqs = max_seqs * 2 if given_seqs is None else max_seqs
    length = values["max_model_len"]
    if given_tokens is None:
        if config_value(INPUTS["is_multimodal"], dict(config))[1]:  # a prefix-LM one raises it to fit an item
            raise _Missing("max_num_batched_tokens: vLLM may raise its default for a multimodal model")
        if not values["enable_chunked_prefill"]:
            max_tokens = max(length, max_tokens)
        max_tokens = min(max_seqs * length, max_tokens)
    if given_seqs is None:
        max_seqs = min(max_seqs, max_tokens)
    return max_tokens, max_seqs
