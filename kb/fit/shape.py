"""A model's shape as vLLM reads it from config.json: layers, heads, KV heads, head size, MLA
ranks, experts, sliding-window layers, dtype and quantization; and its parameter count, which
estimates the weights when the checkpoint's size is not given.

The keys follow vLLM 0.33.0's readers: `ModelArchConfigConvertorBase` (get_head_size,
get_total_num_kv_heads: `num_key_value_heads`, else `num_attention_heads`), the text config of a
multimodal model (`text_config`), `layer_types` / Gemma's alternating windows for hybrid
attention (`get_kv_cache_spec` of each attention layer)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Optional

from kb.checks.vocab import shown_value
from kb.errors import UsageError

# bytes per element of a dtype name (torch's names; vLLM's `--dtype`/`--kv-cache-dtype` words)
DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "fp8": 1, "fp8_e4m3": 1,
               "fp8_e5m2": 1, "fp8_inc": 1, "fp8_ds_mla": 1, "int8": 1, "nvfp4": 1}


MAX_LAYERS = 10_000  # far beyond any model; bounds the per-layer work on a hostile config.json


@dataclass(frozen=True)
class Shape:
    model_type: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    v_head_dim: int
    intermediate: int
    vocab: int
    tied: bool
    dtype: str  # the checkpoint's torch_dtype (bfloat16 when it says float32: vLLM's `auto` picks 16 bits)
    experts: int = 0
    experts_per_token: int = 0
    moe_intermediate: int = 0
    shared_experts: int = 0
    dense_layers: int = 0  # the first layers of a MoE model that stay dense (first_k_dense_replace)
    kv_lora_rank: int = 0  # MLA: one latent of kv_lora_rank + qk_rope_head_dim per token and layer
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    q_lora_rank: int = 0
    sliding_window: int = 0
    sliding: tuple[bool, ...] = ()  # per layer: a sliding-window layer ((): none)
    quant_method: str = ""
    quant_bits: int = 0
    vision_params: int = 0  # a multimodal model's vision/audio tower, estimated from its config
    max_position_embeddings: int = 0

    @property
    def mla(self) -> bool:
        return self.kv_lora_rank > 0


MAX_DIM = 2**31 - 1  # no dimension, count or rank of a model comes near; beyond it, a typo or an attack


def _int_reader(locate: Callable[[str], str]) -> Callable[..., int]:
    """`_int(d, *keys, default=0)`: the first of `keys` that `d` gives as a non-negative integer
    (an integral float is one); a key absent, null, negative (-1: "none" in some configs) or not
    a number is skipped, as before. A number no model can have (not finite, or past MAX_DIM) is a
    UsageError located by `locate(key)`: kb fit never sizes with it."""

    def _int(d: Mapping[str, Any], *keys: str, default: int = 0) -> int:
        for k in keys:
            v = d.get(k)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            if isinstance(v, float) and not math.isfinite(v):
                raise UsageError(f"{k}: expected a finite integer, got {shown_value(v)}", locate(k))
            if v > MAX_DIM:
                raise UsageError(f"{k}: expected an integer of at most {MAX_DIM}, got {shown_value(v)}", locate(k))
            if v >= 0 and (isinstance(v, int) or v.is_integer()):
                return int(v)
        return default

    return _int


def shape_of(config: Mapping[str, Any], where: str = "config.json",
             locate: Optional[Callable[[str], str]] = None) -> Shape:
    """The shape, or UsageError naming the key that is missing or wrong (`locate(key)`:
    `path:line` of the key, else `where`)."""
    _int = _int_reader(locate or (lambda _key: where))
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    assert isinstance(text, dict)
    layers = _int(text, "num_hidden_layers", "n_layer", "num_layers")
    hidden = _int(text, "hidden_size", "n_embd", "d_model")
    heads = _int(text, "num_attention_heads", "n_head")
    if layers > MAX_LAYERS:
        raise UsageError(f"{where}: num_hidden_layers {layers} is more than kb sizes (at most {MAX_LAYERS})")
    if not (layers and hidden and heads):
        missing = [k for k, v in (("num_hidden_layers", layers), ("hidden_size", hidden),
                                  ("num_attention_heads", heads)) if not v]
        raise UsageError(f"{where}: needs {', '.join(missing)} (a positive integer) to size the model")
    kv_heads = _int(text, "num_key_value_heads", "n_head_kv", "num_kv_heads", "multi_query_group_num",
                    default=heads) or heads
    head_dim = _int(text, "head_dim", default=hidden // heads) or hidden // heads
    experts = _int(text, "num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts")
    vocab = _int(text, "vocab_size", "padded_vocab_size", default=32000)
    dtype = str(text.get("torch_dtype") or text.get("dtype") or config.get("torch_dtype") or "bfloat16")
    if dtype in ("float32", "float"):
        dtype = "bfloat16"  # vLLM's `--dtype auto` serves a float32 checkpoint in 16 bits
    quant = config.get("quantization_config") or text.get("quantization_config") or config.get("compression_config")
    method, bits = "", 0
    if isinstance(quant, dict):
        method = str(quant.get("quant_method") or quant.get("format") or "")
        bits = _int(quant, "bits", "w_bit", "num_bits")
        groups = quant.get("config_groups")
        if not bits and isinstance(groups, dict):  # compressed-tensors: the weights' bits of its first group
            first: Any = next(iter(groups.values()), {})
            weights = first.get("weights") if isinstance(first, dict) else None
            bits = _int(weights, "num_bits") if isinstance(weights, dict) else 0
        if not bits and method in ("fp8", "fbgemm_fp8", "modelopt"):
            bits = 8
        if not bits and method in ("mxfp4", "gpt_oss_mxfp4"):
            bits = 4
    window = _int(text, "sliding_window")
    sliding: tuple[bool, ...] = ()
    types = text.get("layer_types")
    if isinstance(types, list) and len(types) == layers and all(isinstance(t, str) for t in types):
        sliding = tuple(t == "sliding_attention" for t in types)
    elif window and text.get("model_type") in ("gemma2", "cohere2"):  # every other layer, the first sliding
        sliding = tuple(i % 2 == 0 for i in range(layers))
    elif window and text.get("model_type") in ("gemma3", "gemma3_text"):
        pattern = _int(text, "sliding_window_pattern", default=6) or 6
        sliding = tuple((i + 1) % pattern != 0 for i in range(layers))
    elif window and text.get("use_sliding_window") is not False and text.get("model_type") in ("mistral", "mixtral"):
        sliding = (True,) * layers
    if not any(sliding):
        sliding, window = (), 0
    vision = config.get("vision_config")
    vision_params = 0
    if isinstance(vision, dict):
        vh = _int(vision, "hidden_size", "embed_dim", "width")
        vl = _int(vision, "num_hidden_layers", "depth", "layers")
        vi = _int(vision, "intermediate_size", default=4 * vh)
        vision_params = vl * (4 * vh * vh + 2 * vh * vi) + vh * hidden * 2
    return Shape(
        model_type=str(text.get("model_type") or config.get("model_type") or ""), layers=layers, hidden=hidden,
        heads=heads, kv_heads=kv_heads, head_dim=head_dim, v_head_dim=_int(text, "v_head_dim", default=head_dim),
        intermediate=_int(text, "intermediate_size", "ffn_dim", "n_inner", default=4 * hidden), vocab=vocab,
        tied=bool(text.get("tie_word_embeddings", config.get("tie_word_embeddings", False))), dtype=dtype,
        experts=experts, experts_per_token=_int(text, "num_experts_per_tok", "moe_topk", "top_k"),
        moe_intermediate=_int(text, "moe_intermediate_size", default=_int(text, "intermediate_size")),
        shared_experts=_int(text, "n_shared_experts", "num_shared_experts"),
        dense_layers=_int(text, "first_k_dense_replace"), kv_lora_rank=_int(text, "kv_lora_rank"),
        qk_rope_head_dim=_int(text, "qk_rope_head_dim"), qk_nope_head_dim=_int(text, "qk_nope_head_dim"),
        q_lora_rank=_int(text, "q_lora_rank"), sliding_window=window, sliding=sliding, quant_method=method,
        quant_bits=bits, vision_params=vision_params,
        max_position_embeddings=_int(text, "max_position_embeddings"))


def params(s: Shape) -> tuple[int, int]:
    """(parameters of the linear layers that quantization shrinks, the others: embeddings, lm_head,
    norms, routers, the vision tower), counted from the shape."""
    embed = s.vocab * s.hidden * (1 if s.tied else 2)
    if s.mla:
        q = s.hidden * s.heads * (s.qk_nope_head_dim + s.qk_rope_head_dim) if not s.q_lora_rank else \
            s.hidden * s.q_lora_rank + s.q_lora_rank * s.heads * (s.qk_nope_head_dim + s.qk_rope_head_dim)
        attn = q + s.hidden * (s.kv_lora_rank + s.qk_rope_head_dim) + \
            s.kv_lora_rank * s.heads * (s.qk_nope_head_dim + s.v_head_dim) + s.heads * s.v_head_dim * s.hidden
    else:
        attn = s.hidden * s.head_dim * (s.heads + 2 * s.kv_heads) + s.heads * s.head_dim * s.hidden
    dense_mlp = 3 * s.hidden * s.intermediate
    if s.experts:
        moe = 3 * s.hidden * s.moe_intermediate * (s.experts + s.shared_experts)
        dense = min(s.dense_layers, s.layers)
        linear = s.layers * attn + dense * dense_mlp + (s.layers - dense) * moe
        other = embed + (s.layers - dense) * s.hidden * s.experts
    else:
        linear = s.layers * (attn + dense_mlp)
        other = embed
    return linear, other + 2 * s.layers * s.hidden + s.vision_params


# online quantization methods that store the linear layers in 8 bits once loaded
ONLINE_8BIT = ("fp8", "fp8_per_tensor", "fp8_per_block", "fp8_per_channel", "experts_int8")


def weight_bytes(s: Shape, quantization: Optional[str] = None) -> float:
    """The checkpoint's weights estimated from the shape: 16-bit, or the quantized linear layers
    at their bits (with a group scale per 128 weights for 4-bit formats)."""
    linear, other = params(s)
    bits = s.quant_bits
    if quantization in ONLINE_8BIT and not bits:
        bits = 8  # online quantization: the linear layers are stored in 8 bits once loaded
    per_linear = float(DTYPE_BYTES.get(s.dtype, 2)) if not bits or bits >= 16 else bits / 8 + (2 / 128 if bits <= 4 else 0)
    return linear * per_linear + other * DTYPE_BYTES.get(s.dtype, 2)
