"""One launch sized as `kb fit` does: the command through vLLM's parser (kb/checks/cli_parse.py),
the values vLLM computes before it starts (max_model_len, the batch defaults per GPU:
kb/checks/computed.py), the release's own defaults (`--gpu-memory-utilization`,
VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, the block size, the extensible KV cache) from its flag
model and its code (kb/fit/follow.py), then the memory arithmetic (kb/fit/memory.py); the errors
it predicts get the ids of the release's raise sites and its own templates, filled with kb's numbers."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from kb.checks.cli_parse import ParseError, has_parser, parse_command
from kb.checks.computed import Hardware
from kb.checks.facts import facts_of
from kb.checks.launch import MAX_LISTED, ConfigFile, parse_launch, serve_words
from kb.checks.vocab import INPUTS, MAX_GPU_GIB, shown_value
from kb.configmodel import ConfigModel
from kb.errors import UsageError
from kb.fit.follow import Rules, rules_of
from kb.fit.memory import GIB, Fit, FitInput, compute
from kb.fit.shape import shape_of
from kb.model import Record

# the memory errors of kb/fit/memory.py: how their template starts in the scanned release, and
# what else it says (two "Free memory on device" errors differ after their values: kb sizes the
# one of the plain utilization, not the one after an external process's cached weights)
TEMPLATES = {
    "no-memory": ("No available memory for the cache blocks", ""),
    "max-seq-len": ("To serve at least one request with the model's max seq len", ""),
    "free-memory": ("Free memory on device", "desired GPU memory utilization"),
    "auto-fit": ("Cannot auto-fit max_model_len", ""),
}


_STARTS = tuple(start for start, _ in TEMPLATES.values())


def fit_error_key(template: str) -> Optional[str]:
    """Which memory error kb fit predicts this template is, if any."""
    if not template.startswith(_STARTS):  # one test for the thousands of other templates
        return None
    return next((key for key, (start, also) in TEMPLATES.items() if template.startswith(start) and also in template),
                None)
MAX_INDEX_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class FitError:
    key: str
    id: Optional[str]  # the raise site's id in this release (None: not a vLLM raise, e.g. CUDA OOM)
    message: str  # the release's template filled with kb's numbers (for id None: kb's own words)
    unfilled: tuple[str, ...] = ()  # placeholders of the template kb has no value for
    after_warmup: bool = False  # raised after CUDA graph capture and warmup (the extensible KV cache)


@dataclass(frozen=True)
class Tried:
    """One value of a changed flag, sized (or refused) as kb fit sizes the launch."""

    value: Any
    outcome: str  # "fits", the memory error's kind, or "invalid: <why>"


@dataclass(frozen=True)
class Suggestion:
    """The smallest change of one flag with which the launch fits, proved: the changed launch sized
    again by fit_one, and the next value towards the launch's own sized the same way (kb/fit/suggest.py)."""

    option: str  # the flag as the changed command writes it (-tp, --max-model-len)
    dest: str
    old: Any  # the launch's value (vLLM's default or computed value when the launch does not give it)
    new: Any
    argv: tuple[str, ...]  # the whole changed command
    changed: tuple[int, int]  # argv[changed[0]:changed[1]] are the words changed or added
    fit: Fit  # the changed launch, sized again: it fits
    tried: tuple[Tried, ...]  # the proof that no nearer value does: each value tried before this one


@dataclass(frozen=True)
class FitReport:
    fit: Optional[Fit]
    errors: tuple[FitError, ...]  # the first failure only: vLLM stops there
    parse_error: Optional[ParseError]
    assumptions: tuple[str, ...]  # what kb assumed, where the launch did not say
    rules: Optional[Rules] = None  # how the release sizes the KV cache, and what kb has not checked for it
    # (step, file, line): the startup steps after the failure, which vLLM does not reach (file "": not read)
    not_reached: tuple[tuple[str, str, int], ...] = ()
    utilization: float = 0.0  # the --gpu-memory-utilization in effect (the release's default when not given)
    suggestions: tuple[Suggestion, ...] = ()  # when it does not fit: the smallest changes that fit
    config_read: Optional[str] = None  # the config.json read, when kb found it (not given with --model-config)
    release: Optional[str] = None  # the release sized against (its pages' links name it), when it is one


def checkpoint_bytes(folder: Optional[Path]) -> Optional[float]:
    """The weights on disk: `metadata.total_size` of model.safetensors.index.json, else the sizes
    of the *.safetensors (else *.bin) files in the model folder; None when there are none."""
    if folder is None or not folder.is_dir():
        return None
    index = folder / "model.safetensors.index.json"
    try:
        if index.is_file() and index.stat().st_size <= MAX_INDEX_BYTES:
            total = json.loads(index.read_text(encoding="utf-8")).get("metadata", {}).get("total_size")
            if isinstance(total, (int, float)) and not isinstance(total, bool) and total > 0:
                return float(total)
        with os.scandir(folder) as entries:
            listed = [e for _, e in zip(range(MAX_LISTED), entries)]  # a folder of millions: only the first looked at
        for pattern in (".safetensors", ".bin"):
            sizes = [e.stat().st_size for e in listed if e.name.endswith(pattern) and e.is_file()]
            if sizes:
                return float(sum(sizes))
    except (OSError, ValueError, AttributeError):
        return None
    return None


def release_defaults(model: Optional[ConfigModel]) -> tuple[float, bool]:
    """The release's `--gpu-memory-utilization` default when the flag says a number (0.34.0: None,
    resolved by kb.fit.follow.Rules) and whether it subtracts CUDA graph memory before sizing the
    KV cache (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS's default), from its flag model; vLLM
    0.33.0's (0.92, on) when it does not say."""
    flag = model.flag("--gpu-memory-utilization") if model is not None else None
    util = flag.default if flag is not None and flag.default_exact and isinstance(flag.default, float) else None
    env = model.env_var("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS") if model is not None else None
    rules = rules_of(model, util)
    return util if util is not None else rules.default_utilization, \
        bool(env.default) if env is not None and env.default_known and env.default_exact else True


def calculator(model: Optional[ConfigModel], records: Sequence[Record]) -> dict[str, object]:
    """What the memory pages' calculator (static/fit.js) computes with for this release: its defaults,
    its rules and its own templates of the memory errors."""
    from kb.fit.memory import definitions

    util, cg = release_defaults(model)
    templates = {key: r.template for key in TEMPLATES
                 for r in [next((r for r in records if fit_error_key(r.template) == key), None)] if r is not None}
    return definitions(util, cg, rules_of(model, util), templates)


def extensible_on(rules: Rules, flags: Mapping[str, Any]) -> bool:
    """`VllmConfig._resolve_extensible_kv_cache` on a CUDA GPU: on unless the launch turns it off,
    gives --kv-cache-memory-bytes or --num-gpu-blocks-override, or uses elastic EP (KV connectors
    that need it off kb does not follow: it says so in the assumptions)."""
    if not rules.extensible or flags.get("enable_extensible_kv_cache") is False:
        return False
    return (flags.get("kv_cache_memory_bytes") is None and flags.get("num_gpu_blocks_override") is None
            and not flags.get("enable_elastic_ep"))


# the config.json inputs of kb check's vocabulary that kb fit sizes with (the others it does not read)
SIZED_BY = ("num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size",
            "max_position_embeddings", "head_dim", "vocab_size")


def refuse_bad_numbers(argv: Sequence[str], config: ConfigFile, hardware: Mapping[str, Any]) -> None:
    """Every number kb fit sizes with, validated where it enters, as kb check validates it
    (kb/checks/vocab.py: the type, finite, the least value that means anything, a physical bound):
    the flags, the hardware facts and the config.json keys of SIZED_BY. UsageError (exit 2) with
    one located line per bad value; the arithmetic never sees a non-finite or absurd value."""
    launch = parse_launch(argv, config, {k: v for k, v in hardware.items() if k in INPUTS})
    bad = [problem for name, problem in launch.bad.items() if INPUTS[name].kind != "config" or name in SIZED_BY]
    used = hardware.get("gpu_memory_used_gib")
    if used is not None and (isinstance(used, bool) or not isinstance(used, (int, float))
                             or not (isinstance(used, int) or math.isfinite(used))
                             or not 0 <= used <= MAX_GPU_GIB):
        bad.append(f"--gpu-memory-used-gib: expected a number from 0 to {MAX_GPU_GIB:g}, got {shown_value(used)}")
    if bad:
        raise UsageError("; ".join(dict.fromkeys(bad)))


def memory_records(records: Sequence[Record]) -> dict[str, Record]:
    """The release's raise site of each memory error kb fit predicts (by TEMPLATES key)."""
    found: dict[str, Record] = {}
    for r in records:
        key = fit_error_key(r.template)
        if key is not None and key not in found:
            found[key] = r
    return found


def fit_one(records: Sequence[Record], model: Optional[ConfigModel], argv: Sequence[str], config: ConfigFile,
            hardware: Mapping[str, Any], checkpoint: Optional[float] = None,
            sites: Optional[Mapping[str, Record]] = None) -> FitReport:
    """The launch sized as vLLM sizes it at startup; `sites`: memory_records(records), when the
    caller sizes many launches of one release."""
    if model is None or not has_parser(model):
        raise UsageError("this release's `vllm serve` parser could not be read, so kb cannot size the launch")
    parsed = parse_command(model, serve_words(argv))
    if parsed.error is not None:
        return FitReport(None, (), parsed.error, ())
    for dest, low in (("tensor_parallel_size", 1), ("pipeline_parallel_size", 1), ("block_size", 1),
                      ("max_num_seqs", 1), ("max_num_batched_tokens", 1)):
        value = parsed.values.get(dest)
        if value is not None and (not isinstance(value, int) or value < low):
            raise UsageError(f"--{dest.replace('_', '-')} {value}: vLLM refuses it (at least {low})")
    refuse_bad_numbers(argv, config, hardware)
    shape = shape_of(config.data, config.path, config.where)  # its keys' problems before any other figure's
    memory = hardware.get("gpu_memory_gib")
    if not isinstance(memory, (int, float)) or isinstance(memory, bool) or memory <= 0:
        raise UsageError("give the GPU: --gpu NAME or --gpu-memory-gib G")
    hw = Hardware.of(hardware)
    facts = facts_of(model, parsed.values, config.data, hardware=hw)
    got, flags = facts.computed.values, {**facts.defaults, **parsed.values}
    assumptions: list[str] = []

    def number(dest: str, default: Any) -> Any:
        value = flags.get(dest)
        return default if value is None else value

    flag_util, cg = release_defaults(model)
    rules = rules_of(model, flag_util)
    extensible = extensible_on(rules, flags)
    default_util = 1.0 if extensible else rules.default_utilization  # CacheConfig.resolved_gpu_memory_utilization
    util = number("gpu_memory_utilization", default_util)
    if not isinstance(util, (int, float)) or not 0 < util <= 1:
        raise UsageError(f"--gpu-memory-utilization {util}: vLLM takes a share above 0 and at most 1")
    length = got.get("max_model_len")
    if not isinstance(length, int):
        raise UsageError("kb cannot tell max_model_len: "
                         f"{facts.computed.missing.get('max_model_len', 'config.json does not give it')}; give --max-model-len")
    tokens, seqs = got.get("max_num_batched_tokens"), got.get("max_num_seqs")
    if not isinstance(tokens, int) or not isinstance(seqs, int):
        tokens, seqs = number("max_num_batched_tokens", 2048), number("max_num_seqs", 256)
        assumptions.append(f"max_num_batched_tokens {tokens}, max_num_seqs {seqs} (vLLM's default here: "
                           f"{facts.computed.missing.get('max_num_batched_tokens', 'unknown')})")
    kv_bytes = number("kv_cache_memory_bytes", None)
    blocks = number("num_gpu_blocks_override", None)
    inp = FitInput(
        shape=shape, total_memory=float(memory) * GIB, memory_exact=bool(hardware.get("memory_exact")),
        tp=int(number("tensor_parallel_size", 1)), pp=int(number("pipeline_parallel_size", 1)),
        utilization=float(util), max_model_len=length,
        auto_fit=parsed.values.get("max_model_len") == -1, kv_cache_dtype=str(number("kv_cache_dtype", "auto")),
        max_num_batched_tokens=tokens, max_num_seqs=seqs, enforce_eager=bool(number("enforce_eager", False)),
        block_size=number("block_size", None), cpu_offload_gib=float(number("cpu_offload_gb", 0) or 0),
        kv_cache_memory_bytes=int(kv_bytes) if isinstance(kv_bytes, (int, float)) else None,
        num_gpu_blocks_override=int(blocks) if isinstance(blocks, int) else None,
        quantization=flags.get("quantization"), checkpoint_bytes=checkpoint,
        memory_used_elsewhere=float(hardware.get("gpu_memory_used_gib") or 0) * GIB,
        estimate_cudagraphs=cg, capability=hw.capability, dtype=str(number("dtype", "auto")),
        extensible=extensible, rules=rules)
    fit = compute(inp)
    found = memory_records(records) if sites is None else sites
    errors = []
    for e in fit.errors:
        record = found.get(e.key)
        message, unfilled = e.text(record.template if record is not None else None)
        errors.append(FitError(e.key, record.id if record is not None else None, message, unfilled, e.after_warmup))
    if checkpoint is None:
        assumptions.append("the weights are estimated from config.json (no checkpoint files beside it)")
    if extensible:
        assumptions.append("the extensible KV cache is on (this release's default on CUDA; it is off with a KV "
                           "connector that shares the cache through legacy CUDA IPC or a custom memory pool)")
    if rules.unverified:
        assumptions.append("not checked against this release's code, sized as the release kb follows: "
                           + ", ".join(rules.unverified))
    later = tuple(s for s in rules.startup if s[0] in fit.not_reached)
    return FitReport(fit, tuple(errors), None, tuple(assumptions), rules, later, float(util))
