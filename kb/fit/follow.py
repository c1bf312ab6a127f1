"""Which release's memory code kb fit follows, pinned by digest (kb.config.computed.digest of each
function, as kb/checks/computed.py pins its own), and the words vLLM builds inside those functions
that its message templates leave as placeholders (`{hint}`, `{estimated_msg}`).

A release whose function has a digest listed here is sized with the arithmetic of the release it
equals. A function whose digest is not listed (or that the tree lacks, where the release kb follows
has it) is named in `unverified`: kb still sizes the launch, and says in the text and the JSON which
steps it could not check against that release's code."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

from kb.configmodel import ConfigModel
from kb.scan.messages import template_parts

# function -> {digest: the release whose code kb follows for it}
KNOWN: dict[str, dict[str, str]] = {
    "request_memory": {"34d714a70ad4f837": "0.33.0", "b72906c57e307429": "0.34.0"},
    "Worker.determine_available_memory": {"9e83aabe20714b11": "0.33.0", "65a3669599655000": "0.34.0"},
    "memory_profiling": {"d2ffd5d4e7f2dede": "0.33.0"},
    "_check_enough_kv_cache_memory": {"7fb22ad1588bb5d7": "0.33.0", "c97a57f3d6adde59": "0.34.0"},
    "_estimate_max_model_len_from_groups": {"b4b689c5cbb53138": "0.33.0"},
    "_auto_fit_max_model_len": {"95c423c7e279c127": "0.33.0", "97f4a9ab06a887e6": "0.34.0"},
    "_get_kv_cache_groups_uniform_page_size": {"0d1a1362d6b3795c": "0.33.0"},
    "update_kv_cache_capacity": {"07c96fe425590489": "0.33.0"},
    # 0.34.0's extensible KV cache (vllm/config/vllm.py, config/cache.py, v1/worker/extensible_kv_cache.py)
    "_more_kv_cache_memory_hint": {"843f39c8999f2930": "0.34.0"},
    "CacheConfig.resolved_gpu_memory_utilization": {"26f5582a90badd3b": "0.34.0"},
    "VllmConfig._resolve_extensible_kv_cache": {"172f85dec632500e": "0.34.0"},
    "measure_kv_cache_bytes": {"854c0e305556a890": "0.34.0"},
}
# the functions every release kb sizes has (the others come with the extensible KV cache)
ALWAYS = ("request_memory", "Worker.determine_available_memory", "memory_profiling", "_check_enough_kv_cache_memory",
          "_estimate_max_model_len_from_groups", "_auto_fit_max_model_len", "_get_kv_cache_groups_uniform_page_size",
          "update_kv_cache_capacity")
EXTENSIBLE = ("VllmConfig._resolve_extensible_kv_cache", "CacheConfig.resolved_gpu_memory_utilization",
              "measure_kv_cache_bytes", "_more_kv_cache_memory_hint")
# v1/worker/extensible_kv_cache.py's margin, when the tree's constants do not say (CUDA: 1 GiB floor)
MARGIN_FLOOR_CUDA = 1 << 30
# the steps of vLLM's startup that can fail for memory, in the order of the release kb follows
# (0.34.0's EngineCore.__init__), for a tree whose own order kb cannot read (kb.config.startup)
STARTUP_FOLLOWED = ("request_memory", "load_model", "determine_available_memory", "get_kv_cache_configs",
                    "compile_or_warm_up_model", "finalize_extensible_kv_cache")
# what each step does, as kb fit's text names it
STEP_WORDS = {
    "request_memory": "the free memory check (request_memory)",
    "load_model": "loading the weights (load_model)",
    "determine_available_memory": "the profile run (determine_available_memory)",
    "get_kv_cache_configs": "the KV cache checks (get_kv_cache_configs)",
    "compile_or_warm_up_model": "CUDA graph capture and warmup (compile_or_warm_up_model)",
    "finalize_extensible_kv_cache": "the KV cache checks after warmup (finalize_extensible_kv_cache)",
}


@dataclass(frozen=True)
class Rules:
    """How one release sizes the KV cache, as far as kb follows it."""

    extensible: bool  # the release has 0.34.0's extensible KV cache (on by default on CUDA and ROCm)
    block_size: int  # CacheConfig.DEFAULT_BLOCK_SIZE
    default_utilization: float  # --gpu-memory-utilization when unset and the KV cache is estimate-sized
    margin_fraction: float  # KV_CACHE_MARGIN_FRACTION of measure_kv_cache_bytes
    hint: str  # the release whose _more_kv_cache_memory_hint kb spells out ("": it has none)
    unverified: tuple[str, ...]  # functions whose code kb has not checked for this release
    # (step, file, line): the startup steps in the order the release reaches them (file "": the
    # order of the release kb follows, the tree's own could not be read)
    startup: tuple[tuple[str, str, int], ...] = tuple((s, "", 0) for s in STARTUP_FOLLOWED)

    def to_json(self) -> dict[str, object]:
        return {"extensible_kv_cache": self.extensible, "default_block_size": self.block_size,
                "default_gpu_memory_utilization": self.default_utilization, "unverified": list(self.unverified),
                "startup": [{"step": s, "file": f or None, "line": n or None} for s, f, n in self.startup]}


def rules_of(model: Optional[ConfigModel], flag_utilization: Optional[float] = None) -> Rules:
    """The rules of the release `model` was read from. `flag_utilization` is the flag model's
    `--gpu-memory-utilization` default where it is a number (before 0.34.0: 0.92)."""
    have = dict(model.followed) if model is not None else {}
    constants = dict(model.constants) if model is not None else {}
    extensible = "VllmConfig._resolve_extensible_kv_cache" in have
    wanted = ALWAYS + (EXTENSIBLE if extensible else ())
    unverified = tuple(f for f in wanted if have.get(f) not in KNOWN.get(f, {}))
    default = constants.get("CacheConfig.DEFAULT_GPU_MEMORY_UTILIZATION", flag_utilization)
    hint_digest = have.get("_more_kv_cache_memory_hint")
    startup = startup_of(model, extensible)
    if any(not file for _, file, _ in startup):
        unverified += ("the startup order (EngineCore.__init__)",)
    return Rules(extensible, int(constants.get("CacheConfig.DEFAULT_BLOCK_SIZE", 16)),
                 float(default) if isinstance(default, (int, float)) and 0 < default <= 1 else 0.92,
                 float(constants.get("KV_CACHE_MARGIN_FRACTION", 0.75)),
                 KNOWN["_more_kv_cache_memory_hint"].get(hint_digest or "", ""), unverified, startup)


def startup_of(model: Optional[ConfigModel], extensible: bool) -> tuple[tuple[str, str, int], ...]:
    """The release's startup steps in its own order (kb.config.startup), when the tree gives every
    step kb sizes (finalize_extensible_kv_cache only with the extensible KV cache); else the order
    of the release kb follows, without files."""
    wanted = [s for s in STARTUP_FOLLOWED if extensible or s != "finalize_extensible_kv_cache"]
    read = tuple(s for s in (model.startup if model is not None else ()) if s[0] in wanted)
    if {s for s, _, _ in read} == set(wanted):
        return read
    return tuple((s, "", 0) for s in wanted)


def kv_hint(rules: Rules, extensible: bool, utilization: float, after_warmup: bool) -> Optional[str]:
    """The `{hint}` of the KV cache memory errors: `_more_kv_cache_memory_hint(vllm_config,
    after_warmup)` of v1/core/kv_cache_planning.py, as the release kb follows spells it (None: kb
    does not follow this release's function)."""
    if rules.hint != "0.34.0":
        return None
    if extensible:
        used_by, graphs_hint = "the model and its activations", ""
        if after_warmup:
            used_by = "the model, its activations, CUDA graphs and warmup"
            graphs_hint = " CUDA graphs take less with fewer or smaller capture sizes in the compilation config."
        if utilization < 1.0:
            return (f"The KV cache gets what is left after {used_by} within `gpu_memory_utilization`={utilization}; "
                    "increase it (with the extensible KV cache it defaults to 1.0) or decrease `max_model_len` or "
                    f"`max_num_seqs`.{graphs_hint}")
        return (f"The extensible KV cache already takes all device memory left after {used_by}; decrease "
                f"`max_model_len` or `max_num_seqs`, or the model needs a device with more memory.{graphs_hint}")
    return ("Try increasing `gpu_memory_utilization` when initializing the engine (this flag also controls CPU "
            "memory reservation on the CPU backend, despite its name).")


def auto_fit_hint(rules: Rules, extensible: bool, utilization: float, after_warmup: bool) -> Optional[str]:
    """The `{hint}` of "Cannot auto-fit max_model_len" (`_auto_fit_max_model_len`, 0.34.0)."""
    if after_warmup and rules.hint == "0.34.0":
        return ("CUDA graph capture and warmup left no memory for the KV cache. Increase `gpu_memory_utilization`, "
                "reduce the memory CUDA graphs take (fewer or smaller capture sizes in the compilation config), or "
                "use more GPUs.")
    return kv_hint(rules, extensible, utilization, False)


def estimated_msg(length: int) -> str:
    """`estimated_msg` of `_check_enough_kv_cache_memory` (the same words in every release kb follows)."""
    return f"Based on the available memory, the estimated maximum model length is {length}. " if length > 0 else ""


_OWNER = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\.")


def placeholder_key(expression: str) -> str:
    """A placeholder as kb names its value: without the objects it is read from
    (`format_gib(init_snapshot.free_memory)` -> `format_gib(free_memory)`,
    `cache_config.gpu_memory_utilization` -> `gpu_memory_utilization`)."""
    return _OWNER.sub("", expression.replace(" ", ""))


def fill(template: str, values: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """The release's template with kb's values in its placeholders (by placeholder_key), and the
    placeholders kb has no value for (left as the template writes them)."""
    parts, names = template_parts(template)
    out, missing = [parts[0]], []
    for name, part in zip(names, parts[1:]):
        value = values.get(placeholder_key(name))
        if value is None:
            missing.append(name)
            value = "{" + name + "}"
        out.append(value + part)
    return "".join(out), tuple(missing)
