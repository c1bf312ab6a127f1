"""What kb needs from a tree to follow the values vLLM computes before its guards
(kb/checks/computed.py): a digest of each function the model follows, so that a release whose
function differs is not computed with another release's arithmetic, and the config.json model
types whose `derive_max_model_len_and_key` vLLM overrides."""

from __future__ import annotations

import ast
import hashlib
from typing import Optional

from kb.config.modules import Modules

# (module, qualified name) of every function kb/checks/computed.py follows
FOLLOWED: tuple[tuple[str, str], ...] = (
    ("vllm.engine.arg_utils", "EngineArgs.get_batch_defaults"),
    ("vllm.engine.arg_utils", "EngineArgs._set_default_max_num_seqs_and_batched_tokens_args"),
    ("vllm.engine.arg_utils", "EngineArgs._set_default_chunked_prefill_and_prefix_caching_args"),
    ("vllm.config.model", "ModelConfig.get_and_verify_max_len"),
    ("vllm.config.model", "ModelConfig.is_chunked_prefill_supported"),
    ("vllm.config.model", "_get_and_verify_max_len"),
    ("vllm.config.parallel", "ParallelConfig.use_batched_dp_moe"),
    ("vllm.transformers_utils.model_arch_config_convertor", "ModelArchConfigConvertorBase.derive_max_model_len_and_key"),
    ("vllm.transformers_utils.config", "iter_rope_parameters"),
    ("vllm.transformers_utils.config", "is_encoder_decoder"),
    ("vllm.config.model", "ModelConfig.is_encoder_decoder"),
    # the memory steps of kb fit (kb/fit/follow.py)
    ("vllm.v1.worker.utils", "request_memory"),
    ("vllm.v1.worker.gpu_worker", "Worker.determine_available_memory"),
    ("vllm.utils.mem_utils", "memory_profiling"),
    ("vllm.v1.core.kv_cache_planning", "_check_enough_kv_cache_memory"),
    ("vllm.v1.core.kv_cache_planning", "_estimate_max_model_len_from_groups"),
    ("vllm.v1.core.kv_cache_planning", "_auto_fit_max_model_len"),
    ("vllm.v1.core.kv_cache_planning", "_get_kv_cache_groups_uniform_page_size"),
    ("vllm.v1.core.kv_cache_planning", "_more_kv_cache_memory_hint"),
    ("vllm.v1.core.kv_cache_utils", "update_kv_cache_capacity"),
    # where releases before kv_cache_planning.py kept them (the first found is the tree's)
    ("vllm.v1.core.kv_cache_utils", "_check_enough_kv_cache_memory"),
    ("vllm.v1.core.kv_cache_utils", "_estimate_max_model_len_from_groups"),
    ("vllm.v1.core.kv_cache_utils", "_auto_fit_max_model_len"),
    ("vllm.v1.core.kv_cache_utils", "_get_kv_cache_groups_uniform_page_size"),
    ("vllm.config.cache", "CacheConfig.resolved_gpu_memory_utilization"),
    ("vllm.config.vllm", "VllmConfig._resolve_extensible_kv_cache"),
    ("vllm.v1.worker.extensible_kv_cache", "measure_kv_cache_bytes"),
)
# (module, qualified name) of the constants kb fit reads from the tree, when they are literals
CONSTANTS: tuple[tuple[str, str], ...] = (
    ("vllm.config.cache", "CacheConfig.DEFAULT_BLOCK_SIZE"),
    ("vllm.config.cache", "CacheConfig.DEFAULT_GPU_MEMORY_UTILIZATION"),
    ("vllm.v1.worker.extensible_kv_cache", "KV_CACHE_MARGIN_FRACTION"),
)
CONVERTORS = ("vllm.transformers_utils.model_arch_config_convertor", "MODEL_ARCH_CONFIG_CONVERTORS")
MAX_LEN_METHOD = "derive_max_model_len_and_key"


def digest(node: ast.AST) -> str:
    """The function as Python reads it (no line numbers, no comments): 16 hex digits."""
    return hashlib.sha256(ast.dump(node, include_attributes=False).encode()).hexdigest()[:16]


def _find(tree: ast.Module, qualname: str) -> Optional[ast.AST]:
    body: list[ast.stmt] = tree.body
    node: Optional[ast.AST] = None
    for part in qualname.split("."):
        node = next((s for s in body if isinstance(s, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                     and s.name == part), None)
        if node is None:
            return None
        body = node.body
    return node


def _constant(tree: ast.Module, qualname: str) -> Optional[ast.expr]:
    """The value a module or class assigns to a name (`X = 1`, `X: ClassVar[int] = 1`)."""
    *owner, name = qualname.split(".")
    body: list[ast.stmt] = tree.body
    if owner:
        found = _find(tree, ".".join(owner))
        if not isinstance(found, ast.ClassDef):
            return None
        body = found.body
    for s in body:
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.target.id == name:
            return s.value
        if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in s.targets):
            return s.value
    return None


def followed_constants(modules: Modules) -> tuple[tuple[str, float], ...]:
    """(qualified name, value) of the CONSTANTS the tree assigns a number literal."""
    out: list[tuple[str, float]] = []
    for module_name, qualname in CONSTANTS:
        module = modules.get(module_name)
        node = _constant(module.tree, qualname) if module is not None else None
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            out.append((qualname, node.value))
    return tuple(out)


def followed_digests(modules: Modules) -> tuple[tuple[str, str], ...]:
    """(qualified name, digest) of the followed functions the tree has (where a function has two
    homes, the first that has it)."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for module_name, qualname in FOLLOWED:
        module = modules.get(module_name)
        node = _find(module.tree, qualname) if module is not None else None
        if node is not None and qualname not in seen:
            seen.add(qualname)
            out.append((qualname, digest(node)))
    return tuple(out)


def max_len_overrides(modules: Modules) -> tuple[str, ...]:
    """The model types of MODEL_ARCH_CONFIG_CONVERTORS whose convertor class (or a base of it in
    the same module, below ModelArchConfigConvertorBase) defines its own derive_max_model_len_and_key."""
    module = modules.get(CONVERTORS[0])
    if module is None:
        return ()
    classes = {s.name: s for s in module.tree.body if isinstance(s, ast.ClassDef)}
    table = next((s.value for s in module.tree.body if isinstance(s, (ast.Assign, ast.AnnAssign))
                  and any(isinstance(t, ast.Name) and t.id == CONVERTORS[1]
                          for t in (s.targets if isinstance(s, ast.Assign) else [s.target]))), None)
    if not isinstance(table, ast.Dict):
        return ()

    def overrides(name: str, hops: int = 0) -> bool:
        cls = classes.get(name)
        if cls is None or name == "ModelArchConfigConvertorBase" or hops > 20:
            return False
        if any(isinstance(s, ast.FunctionDef) and s.name == MAX_LEN_METHOD for s in cls.body):
            return True
        return any(isinstance(b, ast.Name) and overrides(b.id, hops + 1) for b in cls.bases)

    out = {k.value for k, v in zip(table.keys, table.values)
           if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.Name) and overrides(v.id)}
    return tuple(sorted(out))
