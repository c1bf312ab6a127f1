"""The worker's memory budget and the KV cache it leaves, as vLLM computes them at startup, and the
memory errors it raises. Each step cites the function it follows (vllm/...); kb/fit/follow.py pins
each function by digest to the releases whose code kb follows (0.33.0's estimate-based sizing,
0.34.0's extensible KV cache) and names those it has not checked for the scanned release.

- `requested_memory = ceil(total * gpu_memory_utilization)` (v1/worker/utils.py `request_memory`),
  which raises "Free memory on device ..." when the GPU has less free (not with the extensible KV
  cache, whose utilization defaults to 1.0: `CacheConfig.resolved_gpu_memory_utilization`);
- `available = requested - non_kv_cache_memory - cudagraph_estimate` (v1/worker/gpu_worker.py
  `determine_available_memory`), where non_kv_cache_memory is the weights plus what the profile
  run leaves and peaks at (utils/mem_utils.py `memory_profiling`), or `--kv-cache-memory-bytes`;
  with the extensible KV cache the CUDA graph estimate is 0 and this is only the capacity reserved;
- page sizes (v1/kv_cache_interface.py `AttentionSpec.page_size_bytes`, `MLAAttentionSpec`),
  groups of hybrid models and bytes per block (v1/core/kv_cache_planning.py
  `_get_kv_cache_groups_uniform_page_size`, `_get_kv_cache_bytes_per_block`);
- `num_blocks = available // bytes_per_block`, the tokens and concurrency figures
  (v1/core/kv_cache_utils.py `update_kv_cache_capacity`), the errors of
  `_check_enough_kv_cache_memory` and the estimated maximum length (`_estimate_max_model_len_from_groups`);
- with the extensible KV cache, the size measured after CUDA graph capture and warmup
  (v1/worker/extensible_kv_cache.py `measure_kv_cache_bytes`: the budget less what stays resident,
  capped by the device's headroom less a margin, less the transient peak), then the same checks
  again (`shrink_kv_cache_configs`, and auto-fit once more in `finalize_extensible_kv_cache`).

What vLLM measures while profiling (the activation peak, the memory outside torch, CUDA graphs)
kb estimates from the shape with a formula fitted to real startup logs
(tests/data/startup_logs.yaml); every figure says whether it is exact or estimated, and how."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Optional

from kb.fit.follow import MARGIN_FLOOR_CUDA, STARTUP_FOLLOWED, Rules, auto_fit_hint, estimated_msg, fill, kv_hint
from kb.fit.shape import DTYPE_BYTES, ONLINE_8BIT, Shape, weight_bytes

GIB = 1 << 30
# fitted to the profile figures of real vLLM startup logs (tests/data/startup_logs.yaml, vLLM 0.19.0 on
# H100: "torch peak memory increase", "non-torch forward increase memory", "Graph capturing ... took")
SAMPLER_BYTES_PER_LOGIT = 14.5  # logits of min(T, R) requests: model dtype, an fp32 copy, top-k/top-p buffers
NON_TORCH_TP1 = 0.26 * GIB
NON_TORCH_TP = 2.08 * GIB  # with tensor parallelism: NCCL and custom all-reduce buffers
CUDAGRAPH_BASE, CUDAGRAPH_PER_LAYER = 0.6 * GIB, 0.0125 * GIB


@dataclass(frozen=True)
class Figure:
    value: float
    exact: bool
    how: str  # which formula or assumption gives it

    def to_json(self) -> dict[str, object]:
        return {"value": self.value, "exact": self.exact, "how": self.how}


@dataclass(frozen=True)
class FitInput:
    shape: Shape
    total_memory: float  # bytes of one GPU, as torch reports it
    memory_exact: bool  # from the GPU's reported total (else a nominal size)
    tp: int = 1
    pp: int = 1
    utilization: float = 0.92
    max_model_len: int = 0  # as vLLM computes it (kb/checks/computed.py)
    auto_fit: bool = False  # --max-model-len -1 / auto
    kv_cache_dtype: str = "auto"
    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 1024
    enforce_eager: bool = False
    block_size: Optional[int] = None
    cpu_offload_gib: float = 0.0
    kv_cache_memory_bytes: Optional[int] = None
    num_gpu_blocks_override: Optional[int] = None
    quantization: Optional[str] = None
    checkpoint_bytes: Optional[float] = None  # the weights on disk (safetensors index or file sizes)
    memory_used_elsewhere: float = 0.0  # bytes other processes hold on the GPU at startup
    estimate_cudagraphs: bool = True  # VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS's default in the release
    capability: Optional[tuple[int, int]] = None
    dtype: str = "auto"  # --dtype: the weights' and activations' dtype (auto: the checkpoint's)
    extensible: bool = False  # the extensible KV cache is on (0.34.0: the default on CUDA and ROCm)
    rules: Optional[Rules] = None  # the release's (kb/fit/follow.py); None: 0.33.0's estimate-based sizing


# --dtype's words (ModelConfig: `half` is float16, `float` is float32)
DTYPE_WORDS = {"half": "float16", "float": "float32", "float16": "float16", "float32": "float32",
               "bfloat16": "bfloat16"}


@dataclass(frozen=True)
class MemoryError_:
    """A memory error kb predicts: the values of its template's placeholders (by
    kb.fit.follow.placeholder_key), filled into the scanned release's own template by `text`.
    `weights` is not a vLLM raise: loading the weights fails in torch, and `note` says so."""

    key: str  # no-memory | max-seq-len | free-memory | weights | auto-fit
    values: tuple[tuple[str, str], ...] = ()
    after_warmup: bool = False  # raised after CUDA graph capture and warmup (the extensible KV cache)
    note: str = ""  # kb's own words, for an error that is not vLLM's raise

    def text(self, template: Optional[str]) -> tuple[str, tuple[str, ...]]:
        """The message, and the placeholders kb has no value for."""
        if template is None:
            return self.note or f"{self.key}: this release has no raise site kb knows for it", ()
        return fill(template, dict(self.values))

    @property
    def step(self) -> str:
        """The startup step that fails (kb.config.startup)."""
        if self.key == "free-memory":
            return "request_memory"
        if self.key == "weights":
            return "load_model"
        return "finalize_extensible_kv_cache" if self.after_warmup else "get_kv_cache_configs"


@dataclass(frozen=True)
class Fit:
    weights: Figure  # per GPU
    activation_peak: Figure
    non_torch: Figure
    cuda_graph: Figure
    requested: Figure
    available_kv: Figure  # per GPU
    kv_bytes_per_token: Figure  # per GPU, all its layers
    block_size: int
    bytes_per_block: int
    num_blocks: int
    kv_cache_tokens: Figure
    max_concurrency: Figure
    max_model_len: int
    max_model_len_fits: Figure
    errors: tuple[MemoryError_, ...] = field(default_factory=tuple)  # the first failure only: vLLM stops there
    capacity: Optional[Figure] = None  # the extensible KV cache's reserved capacity, sized before CUDA graphs
    kv_headroom: Optional[Figure] = None  # KV cache memory left over after one request of max_model_len
    not_reached: tuple[str, ...] = ()  # the startup steps after the failing one, which vLLM never runs


def format_gib(b: float) -> str:
    """vLLM's format_gib (vllm/utils/mem_utils.py): `str(round(b / GiB, 2))`."""
    return str(round(b / GIB, 2))


def kv_dtype_bytes(s: Shape, kv_cache_dtype: str) -> int:
    if kv_cache_dtype in ("auto", "", None):
        return DTYPE_BYTES.get(s.dtype, 2)
    return 1 if kv_cache_dtype.startswith(("fp8", "nvfp4", "int8", "int4", "turboquant", "octave")) else \
        DTYPE_BYTES.get(kv_cache_dtype, 2)


def default_block_size(s: Shape, capability: Optional[tuple[int, int]], default: int = 16) -> int:
    """Platform.update_block_size_for_backend: the release's CacheConfig.DEFAULT_BLOCK_SIZE
    (FlashAttention, FlashInfer, Triton: 16 up to 0.33.0, 64 since 0.34.0); MLA backends want at
    least their own: FlashMLA 64 on Hopper, CUTLASS MLA 128 on Blackwell."""
    if s.mla and capability is not None:
        if capability[0] == 9:
            return max(default, 64)
        if capability[0] == 10:
            return max(default, 128)
    return default


@dataclass(frozen=True)
class Layout:
    """The KV cache of one worker: page bytes per layer and block, the layer groups that share a
    block id (hybrid models), bytes per block."""

    page: int  # bytes of one block of one layer
    block_size: int
    full_layers: int
    sliding_layers: int
    window: int
    group_size: int  # layers per group (all layers when uniform)
    sliding_groups: int
    full_groups: int

    @property
    def bytes_per_block(self) -> int:
        return self.group_size * self.page

    def blocks_per_request(self, length: int, inflight: int) -> int:
        """Σ over groups cdiv(max_memory_usage_bytes, page) (kv_cache_interface.py
        FullAttentionSpec / SlidingWindowSpec.max_memory_usage_bytes)."""
        full = -(-length // self.block_size)
        sliding = -(-min(self.window - 1 + inflight, length) // self.block_size) + 1
        return self.full_groups * full + self.sliding_groups * sliding


def layout(s: Shape, tp: int, pp: int, kv_cache_dtype: str, block_size: int) -> Layout:
    b = kv_dtype_bytes(s, kv_cache_dtype)
    if s.mla:  # one latent, replicated across TP (MLAAttentionSpec: num_kv_heads 1)
        page = block_size * (s.kv_lora_rank + s.qk_rope_head_dim) * b
    else:  # K and V of max(1, kv_heads // tp) heads (ModelConfig.get_num_kv_heads)
        page = block_size * max(1, s.kv_heads // tp) * (s.head_dim + s.head_dim) * b
    layers = -(-s.layers // pp)  # the largest pipeline stage (get_pp_indices) sets num_blocks
    sliding = round(layers * sum(s.sliding) / len(s.sliding)) if s.sliding else 0
    full = layers - sliding
    if not sliding or not full:  # one spec for every layer: one group of all of them
        return Layout(page, block_size, full, sliding, s.sliding_window, layers, 1 if sliding else 0,
                      1 if full else 0)
    small, large = min(full, sliding), max(full, sliding)
    group = large if large < 1.5 * small else small  # _get_kv_cache_groups_uniform_page_size
    return Layout(page, block_size, full, sliding, s.sliding_window, group, -(-sliding // group), -(-full // group))


def activation_peak(s: Shape, inp: FitInput) -> float:
    """The profile run's transient peak (a dummy batch of max_num_batched_tokens over
    min(max_num_batched_tokens, max_num_seqs) requests, then the sampler on their logits): the
    larger of the sampler's logits and the forward pass's hidden and MLP activations, plus the
    fused-MoE workspace. Estimated; the constants are fitted to real logs."""
    t, r = inp.max_num_batched_tokens, min(inp.max_num_batched_tokens, inp.max_num_seqs)
    sampler = SAMPLER_BYTES_PER_LOGIT * r * s.vocab
    mlp = 0 if s.experts else 3 * s.intermediate // inp.tp
    forward = t * (4 * s.hidden + mlp) * 2
    moe = 2 * t * s.experts_per_token * 2 * s.moe_intermediate // inp.tp * 2 if s.experts else 0
    return max(sampler, forward) + moe


def compute(inp: FitInput) -> Fit:
    s = inp.shape if inp.dtype not in DTYPE_WORDS else replace(inp.shape, dtype=DTYPE_WORDS[inp.dtype])
    rules = inp.rules
    extensible = inp.extensible and inp.kv_cache_memory_bytes is None and inp.num_gpu_blocks_override is None
    block = inp.block_size or default_block_size(s, inp.capability, rules.block_size if rules is not None else 16)
    lay = layout(s, inp.tp, inp.pp, inp.kv_cache_dtype, block)
    if inp.checkpoint_bytes is not None:
        weights = Figure(inp.checkpoint_bytes / (inp.tp * inp.pp), True,
                         "the checkpoint's size split over tensor and pipeline ranks")
    else:
        weights = Figure(weight_bytes(s, inp.quantization) / (inp.tp * inp.pp), False,
                         "parameters counted from config.json at their dtype or quantized bits, split over the ranks")
    if inp.cpu_offload_gib:
        weights = Figure(max(0.0, weights.value - inp.cpu_offload_gib * GIB), weights.exact,
                         weights.how + ", less --cpu-offload-gb")
    requested = Figure(float(math.ceil(inp.total_memory * inp.utilization)), inp.memory_exact,
                       "ceil(total memory x --gpu-memory-utilization) (request_memory)")
    act = Figure(activation_peak(s, inp), False,
                 f"profile run of {inp.max_num_batched_tokens} tokens, {min(inp.max_num_batched_tokens, inp.max_num_seqs)} "
                 "requests: the sampler's logits or the forward activations, plus the MoE workspace (fitted to real logs)")
    non_torch = Figure(NON_TORCH_TP if inp.tp > 1 else NON_TORCH_TP1, False,
                       "memory outside torch that the profile run adds (fitted to real logs)")
    graphs = 0.0 if inp.enforce_eager else CUDAGRAPH_BASE + CUDAGRAPH_PER_LAYER * (lay.full_layers + lay.sliding_layers)
    if inp.enforce_eager:
        cg = Figure(0.0, True, "--enforce-eager: no CUDA graphs")
    elif extensible:
        cg = Figure(graphs, False, "CUDA graph memory, measured after capture by the extensible KV cache, not "
                                   "subtracted before (fitted to real logs)")
    elif not inp.estimate_cudagraphs:
        cg = Figure(0.0, True, "this release does not subtract CUDA graph memory before sizing the KV cache")
    else:
        cg = Figure(graphs, False, "CUDA graph memory estimate, subtracted by default (fitted to real logs)")
    if inp.kv_cache_memory_bytes is not None:
        available = Figure(float(inp.kv_cache_memory_bytes), True, "--kv-cache-memory-bytes")
    else:
        available = Figure(requested.value - weights.value - act.value - non_torch.value - (0.0 if extensible else cg.value),
                           False, "requested - weights - activation peak - non-torch" +
                           (" (the extensible KV cache's capacity: CUDA graphs are measured after warmup)" if extensible
                            else " - CUDA graphs (determine_available_memory)"))
    capacity: Optional[Figure] = None
    free = inp.total_memory - inp.memory_used_elsewhere
    if extensible:  # measure_kv_cache_bytes, with kb's estimates of what it measures
        capacity = available
        resident = weights.value + non_torch.value + cg.value
        margin = max(MARGIN_FLOOR_CUDA, (rules.margin_fraction if rules is not None else 0.75) * act.value)
        measured = min(requested.value - resident, free - resident - margin) - act.value
        available = Figure(max(0.0, measured), False,
                           "measured after CUDA graph capture and warmup (measure_kv_cache_bytes): min(requested, "
                           "free - margin) - weights - non-torch - CUDA graphs - activation peak, margin = "
                           "max(1 GiB, 0.75 x activation peak)")
    bpb = lay.bytes_per_block
    inflight = (inp.pp + 1) * inp.max_num_batched_tokens  # max_concurrent_batches * T (async scheduling)
    blocks = max(0, int(available.value // bpb))
    if inp.num_gpu_blocks_override is not None:
        blocks = inp.num_gpu_blocks_override
    length = inp.max_model_len
    before = capacity.value if capacity is not None else available.value
    check = before - bpb if inp.num_gpu_blocks_override is None else (blocks - 1) * bpb

    def needed(n: int) -> int:
        return bpb * lay.blocks_per_request(n, inflight)

    def longest(memory: float) -> int:  # _estimate_max_model_len_from_groups: binary search over [1, length]
        if memory <= 0 or needed(1) > memory:
            return 0
        lo, hi = 1, max(1, length)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if needed(mid) <= memory:
                lo = mid
            else:
                hi = mid - 1
        return lo

    util = inp.utilization
    errors: list[MemoryError_] = []

    def kv_errors(memory: float, after: bool) -> bool:
        """_check_enough_kv_cache_memory's errors (after auto-fit's); True when one is raised."""
        nonlocal length
        hint = kv_hint(rules, extensible, util, after) if rules is not None else None
        hinted = () if hint is None else (("hint", hint),)
        if inp.auto_fit and not (after and not extensible):
            fits = longest(memory)
            if fits <= 0:
                fit_hint = auto_fit_hint(rules, extensible, util, after) if rules is not None else None
                errors.append(MemoryError_("auto-fit", () if fit_hint is None else (("hint", fit_hint),), after))
                return True
            length = min(length, fits)
        if memory <= 0:
            errors.append(MemoryError_("no-memory", hinted, after))
            return True
        if needed(length) > memory:
            errors.append(MemoryError_("max-seq-len", (
                ("max_model_len", str(length)), ("format_gib(needed_memory)", format_gib(needed(length))),
                ("format_gib(available_memory)", format_gib(memory)), ("estimated_msg", estimated_msg(longest(memory))),
                *hinted), after))
            return True
        return False

    if inp.memory_used_elsewhere and free < requested.value and not extensible:
        errors.append(MemoryError_("free-memory", (
            ("device_", "cuda:0"), ("format_gib(free_memory)", format_gib(free)),
            ("format_gib(total_memory)", format_gib(inp.total_memory)), ("gpu_memory_utilization", str(util)),
            ("format_gib(requested_memory)", format_gib(requested.value)))))
    if weights.value > free:  # loading allocates them whatever --gpu-memory-utilization says
        errors.append(MemoryError_("weights", note=(
            f"loading the weights fails with CUDA out of memory: they take {format_gib(weights.value)} GiB per GPU, "
            f"more than the GPU's free memory ({format_gib(free)} GiB)")))
    stopped = kv_errors(check, False)
    if extensible and not stopped:
        kv_errors((blocks - 1) * bpb, True)
    checked = check if not extensible else (blocks - 1) * bpb
    fits_len = longest(checked)
    first, not_reached = first_failure(errors, rules, extensible)
    per_request = lay.blocks_per_request(length, inflight) if length > 0 else 1
    concurrency = blocks / per_request
    tokens = int(concurrency * length)
    per_token = (lay.full_layers + lay.sliding_layers) * lay.page / block
    derived = not available.exact
    return Fit(weights, act, non_torch, cg, requested, available,
               Figure(per_token, True, "K and V (or the MLA latent) of every layer on one GPU, at the KV cache dtype"),
               block, bpb, blocks,
               Figure(float(tokens), not derived, "int(num_blocks / blocks per request x max_model_len)"),
               Figure(concurrency, not derived, "num_blocks / blocks per request at max_model_len"), length,
               Figure(float(fits_len), not derived, "the longest max_model_len whose blocks fit (binary search)"),
               first, capacity,
               Figure(checked - (needed(length) if length > 0 else 0), not derived,
                      "the KV cache memory vLLM checks less what one request of max_model_len needs"),
               not_reached)


def first_failure(errors: list[MemoryError_], rules: Optional[Rules], extensible: bool
                  ) -> tuple[tuple[MemoryError_, ...], tuple[str, ...]]:
    """The failure vLLM meets first, in the order its startup runs the steps (the release's, read
    from its source: Rules.startup), and the steps after it, which vLLM never reaches (the checks
    after warmup run only with the extensible KV cache)."""
    order = [s for s, _, _ in rules.startup] if rules is not None else list(STARTUP_FOLLOWED)
    if not extensible:
        order = [s for s in order if s != "finalize_extensible_kv_cache"]
    if not errors:
        return (), ()

    def at(step: str) -> int:
        return order.index(step) if step in order else len(order)

    first = min(errors, key=lambda e: at(e.step))  # min keeps the first of one step (the order kb checks them)
    return (first,), tuple(order[at(first.step) + 1:])


SENTINEL_UTILIZATION = 0.123456789  # stands for the calculator's utilization in the hints it is given


def definitions(utilization: float, estimate_cudagraphs: bool, rules: Optional[Rules] = None,
                templates: Optional[dict[str, str]] = None) -> dict[str, object]:
    """What static/fit.js computes with: the constants, GPUs and words this module uses, the
    release's defaults and rules, and its own templates of the memory errors (by kb/fit/launch.py
    TEMPLATES key), so that the page's calculator and `kb fit` share them. `utilization` is the
    flag's default when it is a number (None in 0.34.0: the rules resolve it)."""
    from kb.hardware import GPUS

    def hint(extensible: bool, after: bool, below: bool = True) -> Optional[str]:
        util = SENTINEL_UTILIZATION if below else 1.0
        text = kv_hint(rules, extensible, util, after) if rules is not None else None
        return None if text is None else text.replace(str(SENTINEL_UTILIZATION), "{u}")

    auto_after = auto_fit_hint(rules, True, 1.0, True) if rules is not None else None
    extensible = rules is not None and rules.extensible
    return {"samplerBytesPerLogit": SAMPLER_BYTES_PER_LOGIT, "nonTorchTp1": NON_TORCH_TP1, "nonTorchTp": NON_TORCH_TP,
            "cudagraphBase": CUDAGRAPH_BASE, "cudagraphPerLayer": CUDAGRAPH_PER_LAYER, "dtypeBytes": DTYPE_BYTES,
            "online8bit": list(ONLINE_8BIT), "utilization": 1.0 if extensible else utilization,
            "estimateCudagraphs": estimate_cudagraphs, "extensible": extensible,
            "blockDefault": rules.block_size if rules is not None else 16,
            "marginFraction": rules.margin_fraction if rules is not None else 0.75, "marginFloor": MARGIN_FLOOR_CUDA,
            "batch": {"large": [8192, 1024], "huge": [16384, 1024], "small": [2048, 256]},
            "gpus": {g.key: {"name": g.name, "memory_gib": g.memory_gib, "capability": list(g.capability)} for g in GPUS},
            "templates": dict(sorted((templates or {}).items())),
            "startup": [s for s, _, _ in rules.startup] if rules is not None else list(STARTUP_FOLLOWED),
            "hints": {"classic": hint(False, False), "beforeBelow": hint(True, False), "beforeFull": hint(True, False, False),
                      "afterBelow": hint(True, True), "afterFull": hint(True, True, False), "autoFitAfter": auto_after}}
