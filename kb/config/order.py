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
MAX_NODES = 100_000  # syntax nodes looked at in one function


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
    out: dict[str, int] = {}
    for call in _calls_in_order(method.node):
        name = _config_of(reader, cls, call)
        if name is not None and name not in out:
            out[name] = call.lineno
    return tuple(out.items())


def _calls_in_order(node: ast.AST) -> list[ast.Call]:
    """The calls of a function in source order (at most MAX_NODES nodes looked at)."""
    calls: list[ast.Call] = []
    stack, seen = [node], 0
    while stack and seen < MAX_NODES:
        n = stack.pop()
        seen += 1
        if isinstance(n, ast.Call):
            calls.append(n)
        stack.extend(ast.iter_child_nodes(n))
    return sorted(calls, key=lambda n: (n.lineno, n.col_offset))


def _called(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _config_of(reader: Reader, engine: ClassRef, call: ast.Call) -> Optional[str]:
    func = call.func
    name = _called(func)
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
            return next((_called(n.func) for n in _calls_in_order(method.node) if _CONFIG.fullmatch(_called(n.func))),
                        None)
    return None


PARSER_MODULE = "vllm.utils.argparse_utils"
MAX_HINT = 2_000  # characters of a hint kept, and of the pattern that selects it


def parser_hints(reader: Reader) -> tuple[tuple[str, str], ...]:
    """What FlexibleArgumentParser.error adds to argparse's message: (the `re.search` pattern
    of its condition, the text it appends), for `message += "..."` under an `if` that searches
    the message (vLLM 0.33.0: the `--task` hint)."""
    module = reader.modules.get(PARSER_MODULE)
    found = reader.modules.lookup(module, "FlexibleArgumentParser") if module is not None else None
    cls = reader.found_value(found) if found is not None else None
    method = reader.class_attr(cls, "error") if isinstance(cls, ClassRef) else None
    if not isinstance(method, FunctionRef) or isinstance(method.node, ast.Lambda):
        return ()
    out: list[tuple[str, str]] = []
    for stmt in method.node.body:
        if not isinstance(stmt, ast.If):
            continue
        searches = [n for n in ast.walk(stmt.test) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr == "search" and n.args and isinstance(n.args[0], ast.Constant)
                    and isinstance(n.args[0].value, str)]
        added = [s.value.value for s in stmt.body if isinstance(s, ast.AugAssign) and isinstance(s.op, ast.Add)
                 and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)]
        if len(searches) == 1 and len(added) == 1 and "unrecognized arguments:" in ast.unparse(stmt.test):
            pattern = searches[0].args[0]
            text = pattern.value if isinstance(pattern, ast.Constant) else None
            if isinstance(text, str) and len(text) <= MAX_HINT and len(added[0]) <= MAX_HINT:
                out.append((text, added[0]))
    return tuple(out)
