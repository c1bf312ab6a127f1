"""The order in which `EngineArgs.create_engine_config` builds vLLM's configs, read from its
source: each `XConfig(...)` it calls, and each `self.create_x_config(...)` (the config that method
returns, by its annotation, else the first `XConfig(...)` it builds), at the line of the call,
first occurrence of each class. A config's pydantic field constraints, validators and
`__post_init__` run there, so the first error a launch meets is the one of the earliest config.
"""

from __future__ import annotations

import ast
import re
from typing import Optional

from kb.config.interp import ClassRef, FunctionRef, Reader

ENGINE_MODULE = "vllm.engine.arg_utils"
_CONFIG = re.compile(r"[A-Z]\w*Config")
MAX_CALLS = 5_000  # call nodes looked at in the function


def build_order(reader: Reader) -> tuple[tuple[str, int], ...]:
    """(config class, line in vllm/engine/arg_utils.py) in the order create_engine_config builds them."""
    module = reader.modules.get(ENGINE_MODULE)
    found = reader.modules.lookup(module, "EngineArgs") if module is not None else None
    cls = reader.found_value(found) if found is not None else None
    if not isinstance(cls, ClassRef):
        return ()
    method = reader.class_attr(cls, "create_engine_config")
    if not isinstance(method, FunctionRef) or isinstance(method.node, ast.Lambda):
        return ()
    calls = sorted((n for n in _limited_walk(method.node) if isinstance(n, ast.Call)),
                   key=lambda n: (n.lineno, n.col_offset))
    out: dict[str, int] = {}
    for call in calls:
        name = _config_of(reader, cls, call)
        if name is not None and name not in out:
            out[name] = call.lineno
    return tuple(out.items())


def _limited_walk(node: ast.AST) -> list[ast.AST]:
    out: list[ast.AST] = []
    stack = [node]
    while stack and len(out) < MAX_CALLS * 20:
        n = stack.pop()
        out.append(n)
        stack.extend(ast.iter_child_nodes(n))
    return out


def _config_of(reader: Reader, engine: ClassRef, call: ast.Call) -> Optional[str]:
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if _CONFIG.fullmatch(name) and not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                                        and func.value.id == "self"):
        return name
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self" and \
            re.fullmatch(r"create_\w+_config", name):
        method = reader.class_attr(engine, name)
        if isinstance(method, FunctionRef) and not isinstance(method.node, ast.Lambda):
            returns = method.node.returns
            text = ast.unparse(returns) if returns is not None else ""
            named = _CONFIG.search(text.replace("VllmConfig", ""))
            if named:
                return named.group(0)
            inner_calls = sorted((n for n in _limited_walk(method.node) if isinstance(n, ast.Call)),
                                 key=lambda n: (n.lineno, n.col_offset))
            for n in inner_calls:
                if isinstance(n, ast.Call):
                    inner = n.func.id if isinstance(n.func, ast.Name) else n.func.attr if isinstance(
                        n.func, ast.Attribute) else ""
                    if _CONFIG.fullmatch(inner):
                        return inner
    return None
