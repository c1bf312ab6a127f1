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


def followed_digests(modules: Modules) -> tuple[tuple[str, str], ...]:
    """(qualified name, digest) of the followed functions the tree has."""
    out: list[tuple[str, str]] = []
    for module_name, qualname in FOLLOWED:
        module = modules.get(module_name)
        node = _find(module.tree, qualname) if module is not None else None
        if node is not None:
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
