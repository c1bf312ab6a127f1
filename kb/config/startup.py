"""The order in which vLLM's engine reaches the steps of its startup that can fail for memory, read
from its source: from `EngineCore.__init__`, down the calls that lead to each step, at the line of
each call (the first call of that name in the function). kb fit predicts the failure of the
earliest step only: vLLM stops there and never reaches the later ones.

A step is the call that runs it: `request_memory` ("Free memory on device ..." in
`Worker.init_device`), `load_model` (the weights; a CUDA out of memory when they do not fit),
`determine_available_memory` (the profile run), `get_kv_cache_configs` (the KV cache checks),
`compile_or_warm_up_model` (CUDA graph capture and warmup) and `finalize_extensible_kv_cache`
(the checks after warmup, with the extensible KV cache). The executor's worker steps are read in
`UniProcExecutor._init_executor`; a multi-process executor's workers run the same two calls in
the same order (`WorkerProc.__init__`)."""

from __future__ import annotations

import ast
from typing import Optional

from kb.config.computed import _find
from kb.config.modules import Modules

Where = tuple[str, str]  # (module, qualified name of the function)
ENGINE_INIT: Where = ("vllm.v1.engine.core", "EngineCore.__init__")
EXECUTOR_INIT: Where = ("vllm.v1.executor.abstract", "Executor.__init__")
UNIPROC_INIT: Where = ("vllm.v1.executor.uniproc_executor", "UniProcExecutor._init_executor")
WORKER_INIT: Where = ("vllm.v1.worker.gpu_worker", "Worker.init_device")
KV_INIT: Where = ("vllm.v1.engine.core", "EngineCore._initialize_kv_caches")
_EXECUTOR = ((ENGINE_INIT, "executor_class"), (EXECUTOR_INIT, "_init_executor"))
_KV = ((ENGINE_INIT, "_initialize_kv_caches"),)

# step -> the calls that lead to it: (function, name of the call made in it), outermost first
STEPS: dict[str, tuple[tuple[Where, str], ...]] = {
    "request_memory": (*_EXECUTOR, (UNIPROC_INIT, "init_device"), (WORKER_INIT, "request_memory")),
    "load_model": (*_EXECUTOR, (UNIPROC_INIT, "load_model")),
    "determine_available_memory": (*_KV, (KV_INIT, "determine_available_memory")),
    "get_kv_cache_configs": (*_KV, (KV_INIT, "get_kv_cache_configs")),
    "compile_or_warm_up_model": (*_KV, (KV_INIT, "compile_or_warm_up_model")),
    "finalize_extensible_kv_cache": (*_KV, (KV_INIT, "finalize_extensible_kv_cache")),
}
MAX_NODES = 100_000  # syntax nodes looked at in one function


def _called(node: ast.expr) -> Optional[str]:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def first_call(function: ast.AST, name: str) -> Optional[int]:
    """The line of the first call of `name` (`name(...)`, `x.name(...)`) in the function's body,
    by position in the source; None when it makes none (or is larger than kb reads)."""
    found: Optional[tuple[int, int]] = None
    for n, node in enumerate(ast.walk(function)):
        if n > MAX_NODES:
            return None
        if isinstance(node, ast.Call) and _called(node.func) == name:
            at = (node.lineno, node.col_offset)
            found = at if found is None or at < found else found
    return found[0] if found is not None else None


def startup_order(modules: Modules) -> tuple[tuple[str, str, int], ...]:
    """(step, file, line of the call that runs it) in the order vLLM's startup reaches the steps;
    a step whose calls the tree does not make (or kb cannot find) is left out."""
    lines: dict[Where, Optional[tuple[str, ast.AST]]] = {}

    def function(where: Where) -> Optional[tuple[str, ast.AST]]:
        if where not in lines:
            module = modules.get(where[0])
            node = _find(module.tree, where[1]) if module is not None else None
            lines[where] = (module.path, node) if module is not None and node is not None else None
        return lines[where]

    placed: list[tuple[tuple[int, ...], str, str, int]] = []
    for step, path in STEPS.items():
        position: list[int] = []
        file = ""
        for where, call in path:
            found = function(where)
            line = first_call(found[1], call) if found is not None else None
            if found is None or line is None:
                break
            position.append(line)
            file = found[0]
        else:
            placed.append((tuple(position), step, file, position[-1]))
    return tuple((step, file, line) for _, step, file, line in sorted(placed))
