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

from kb.config.exits import (
    exits_before,
)
from kb.config.interp import Reader
from kb.config.refs import ClassRef, FunctionRef
from kb.config.requests import SAMPLING_CLASS, SAMPLING_MODULE
from kb.configmodel import Build

ENGINE_MODULE = "vllm.engine.arg_utils"
# the request model whose construction runs vLLM's request checks (kb/checks/derive.py REQUEST_FILE)
REQUEST_MODULE, REQUEST_CLASS = SAMPLING_MODULE, SAMPLING_CLASS
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


UNKNOWN_CONDITION = "?"  # a construction in a loop, a `try` or a `with`: when it runs is not read


def builds(reader: Reader) -> tuple[Build, ...]:
    """What create_engine_config builds each config from, in build_order's order: the condition
    of its first construction (the `if` and conditional expressions around it) and its keyword
    arguments; for a `self.create_x_config(...)` call, those of the `XConfig(...)` that method makes."""
    found = _engine_method(reader)
    if found is None:
        return ()
    cls, method = found
    body = method.node.body if not isinstance(method.node, ast.Lambda) else []
    out: dict[str, Build] = {}
    for call, when in _calls_under(body, ()):
        name = _config_of(reader, cls, call)
        if name is None or name in out:
            continue
        inner: ast.Call = call
        inner_when: tuple[str, ...] = ()
        if _called(call.func) != name:  # self.create_x_config(...): the call it makes
            made = reader.class_attr(cls, _called(call.func))
            if isinstance(made, FunctionRef) and not isinstance(made.node, ast.Lambda):
                inner, inner_when = next(((c, (*exits_before(made.node.body, c.lineno, own=True), *w))
                                          for c, w in _calls_under(made.node.body, ())
                                          if _called(c.func) == name), (call, (UNKNOWN_CONDITION,)))
            else:
                inner_when = (UNKNOWN_CONDITION,)
        conditions = (*exits_before(body, call.lineno), *when, *inner_when)
        when_text = UNKNOWN_CONDITION if UNKNOWN_CONDITION in conditions else " and ".join(
            f"({c})" if len(conditions) > 1 else c for c in conditions)
        args = tuple((k.arg, ast.unparse(k.value)) for k in inner.keywords if k.arg is not None)
        spread = bool(inner.args) or any(k.arg is None for k in inner.keywords)
        out[name] = Build(name, call.lineno, when_text, args, spread, inner.lineno)
    return tuple(out.values())


CONFIG_PACKAGE = "vllm.config"


VLLM_MODULE = "vllm.config.vllm"
MAX_HOPS = 2  # VllmConfig methods followed from its __post_init__


def config_calls(reader: Reader) -> tuple[tuple[str, str, str], ...]:
    """(attribute, method, condition) for each `self.<x>_config.<method>(...)` that
    `VllmConfig.__post_init__` makes, directly or in a VllmConfig method it calls (up to
    MAX_HOPS): where a config's own methods run once every config is built. The condition is
    the `if`s and early returns around the call, as source in VllmConfig's scope, joined by
    `and` ("" when none; UNKNOWN_CONDITION inside a loop, `try`, `with` or `match`)."""
    from kb.scan.calls import reached_when

    module = reader.modules.get(VLLM_MODULE)
    cls = next((n for n in module.tree.body if isinstance(n, ast.ClassDef) and n.name == "VllmConfig"), None) \
        if module is not None else None
    if cls is None:
        return ()
    methods = {n.name: n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    out: dict[tuple[str, str], str] = {}

    def visit(fn: ast.FunctionDef | ast.AsyncFunctionDef, outer: tuple[str, ...], hops: int) -> None:
        seen = 0
        for n in ast.walk(fn):
            seen += 1
            if seen > MAX_NODES:
                return
            if not isinstance(n, ast.Call) or not isinstance(n.func, ast.Attribute):
                continue
            under, certain = reached_when(fn.body, n.lineno, enclosing=True)
            conditions = (*outer, *(ast.unparse(u) for u in under), *(() if certain else (UNKNOWN_CONDITION,)))
            target = n.func.value
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and \
                    target.value.id == "self" and target.attr.endswith("_config"):
                text = UNKNOWN_CONDITION if UNKNOWN_CONDITION in conditions else " and ".join(
                    f"({c})" if len(conditions) > 1 else c for c in conditions)
                out.setdefault((target.attr, n.func.attr), text)
            elif isinstance(target, ast.Name) and target.id == "self" and n.func.attr in methods and \
                    hops < MAX_HOPS and methods[n.func.attr] is not fn:
                visit(methods[n.func.attr], conditions, hops + 1)

    if "__post_init__" in methods:
        visit(methods["__post_init__"], (), 0)
    return tuple((a, m, c) for (a, m), c in sorted(out.items()))


def engine_configs(reader: Reader) -> tuple[tuple[str, str, int], ...]:
    """(local, config class, line) for each local of create_engine_config that holds a config it
    builds (`model_config = self.create_model_config()`, `lora_config = LoRAConfig(...) if ... else
    None`), in line order."""
    found = _engine_method(reader)
    if found is None or isinstance(found[1].node, ast.Lambda):
        return ()
    cls, method = found
    out: list[tuple[str, str, int]] = []
    seen = 0
    for n in ast.walk(method.node):
        seen += 1
        if seen > MAX_NODES:
            break
        if not (isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)):
            continue
        value = n.value.body if isinstance(n.value, ast.IfExp) else n.value
        name = _config_of(reader, cls, value) if isinstance(value, ast.Call) else None
        if name is not None:
            out.append((n.targets[0].id, name, n.lineno))
    return tuple(sorted(out, key=lambda x: (x[2], x[0])))


def _engine_method(reader: Reader) -> Optional[tuple[ClassRef, FunctionRef]]:
    module = reader.modules.get(ENGINE_MODULE)
    found = reader.modules.lookup(module, "EngineArgs") if module is not None else None
    cls = reader.found_value(found) if found is not None else None
    if not isinstance(cls, ClassRef):
        return None
    method = reader.class_attr(cls, "create_engine_config")
    if not isinstance(method, FunctionRef) or isinstance(method.node, ast.Lambda):
        return None
    return cls, method


def _calls_under(body: list[ast.stmt], when: tuple[str, ...]) -> list[tuple[ast.Call, tuple[str, ...]]]:
    """The calls of a block in source order, each with the conditions it runs under (at most
    MAX_NODES nodes looked at): an `if`'s test for its body and its negation for its `else`, the
    same of conditional expressions; UNKNOWN_CONDITION inside loops, `try`, `with` and `match`."""
    out: list[tuple[ast.Call, tuple[str, ...]]] = []
    stack: list[tuple[ast.AST, tuple[str, ...]]] = [(s, when) for s in reversed(body)]
    seen = 0
    while stack and seen < MAX_NODES:
        n, cond = stack.pop()
        seen += 1
        children: list[tuple[ast.AST, tuple[str, ...]]]
        if isinstance(n, (ast.If, ast.IfExp)):
            test = ast.unparse(n.test)
            children = [(n.test, cond)]
            body_nodes = n.body if isinstance(n.body, list) else [n.body]
            else_nodes = n.orelse if isinstance(n.orelse, list) else [n.orelse]
            children += [(b, (*cond, test)) for b in body_nodes] + [(b, (*cond, f"not ({test})")) for b in else_nodes]
        elif isinstance(n, (ast.For, ast.AsyncFor, ast.While, ast.Try, ast.With, ast.AsyncWith, ast.Match,
                            ast.BoolOp, ast.comprehension, ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
            children = [(c, (*cond, UNKNOWN_CONDITION)) for c in ast.iter_child_nodes(n)]
        else:
            children = [(c, cond) for c in ast.iter_child_nodes(n)]
        if isinstance(n, ast.Call):
            out.append((n, cond))
        stack.extend(reversed(children))
    return sorted(out, key=lambda c: (c[0].lineno, c[0].col_offset))


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


def post_init_order(reader: Reader) -> tuple[tuple[str, str, int], ...]:
    """(class, method, line) for each method of a config class that its `__post_init__` calls
    (`self.method(...)`), directly or through the methods it calls: the line of `__post_init__` at
    which it first runs. What a method sets runs before a check of `__post_init__` only when that
    line comes first. A method that another class's code calls (by its name) is left out: it may
    run at another time."""
    out: list[tuple[str, str, int]] = []
    names = sorted(n for n in reader.modules.by_name if n.startswith(CONFIG_PACKAGE + ".") or n == ENGINE_MODULE)
    classes: list[ast.ClassDef] = []
    for name in names:
        module = reader.modules.get(name)
        classes += [c for c in module.tree.body if isinstance(c, ast.ClassDef)] if module is not None else []
    request = reader.modules.get(REQUEST_MODULE)  # the request model: its own module's other classes call it
    if request is not None:
        classes += [c for c in request.tree.body if isinstance(c, ast.ClassDef) and c.name == REQUEST_CLASS]
    called = [{n.func.attr for n in ast.walk(c) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
              for c in classes]
    for i, cls in enumerate(classes):
        methods = {f.name: f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if "__post_init__" not in methods:
            continue
        elsewhere = set().union(*(c for j, c in enumerate(called) if j != i))
        if cls.name == REQUEST_CLASS:  # the config classes' own `self._verify_args()` are not calls of it
            elsewhere = {n.func.attr for j, c in enumerate(classes) if j != i for n in ast.walk(c)
                         if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                         and not (isinstance(n.func.value, ast.Name) and n.func.value.id == "self")}
        first: dict[str, int] = {}
        for call in sorted(_self_calls(methods["__post_init__"]), key=lambda c: c.lineno):
            pending = [call.func.attr] if isinstance(call.func, ast.Attribute) else []
            while pending:
                m = pending.pop()
                if m in first or m not in methods or m == "__post_init__" or m in elsewhere:
                    continue
                first[m] = call.lineno
                pending += [c.func.attr for c in _self_calls(methods[m]) if isinstance(c.func, ast.Attribute)]
        out += [(cls.name, m, line) for m, line in first.items()]
    return tuple(sorted(out))


def _self_calls(fn: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and isinstance(n.func.value, ast.Name) and n.func.value.id == "self"]
