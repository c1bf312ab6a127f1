"""The order in which `EngineArgs.create_engine_config` builds vLLM's configs, read from its
source: each `XConfig(...)` it calls, and each `self.create_x_config(...)` (the config that method
returns, by its annotation, else the first `XConfig(...)` it builds), at the line of the call,
first occurrence of each class. A config's pydantic field constraints, validators and
`__post_init__` run there, so the first error a launch meets is the one of the earliest config.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from typing import Optional

from kb.config.interp import ClassRef, FunctionRef, Reader
from kb.config.model import JSON, Build, JsonField

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
                inner, inner_when = next(((c, (*_exits_before(made.node.body, c.lineno), *w))
                                          for c, w in _calls_under(made.node.body, ())
                                          if _called(c.func) == name), (call, (UNKNOWN_CONDITION,)))
            else:
                inner_when = (UNKNOWN_CONDITION,)
        conditions = (*_exits_before(body, call.lineno), *when, *inner_when)
        when_text = UNKNOWN_CONDITION if UNKNOWN_CONDITION in conditions else " and ".join(
            f"({c})" if len(conditions) > 1 else c for c in conditions)
        args = tuple((k.arg, ast.unparse(k.value)) for k in inner.keywords if k.arg is not None)
        spread = bool(inner.args) or any(k.arg is None for k in inner.keywords)
        out[name] = Build(name, call.lineno, when_text, args, spread, inner.lineno)
    return tuple(out.values())


CONFIG_PACKAGE = "vllm.config"


def assigned_fields(reader: Reader) -> tuple[tuple[str, str, str, str, int, str], ...]:
    """(class, attribute, how, method, line, when) for every `self.x = ...` (or `+=`,
    `object.__setattr__(self, "x", ...)`) in a method of a class of vllm/config/ or of EngineArgs:
    the fields vLLM sets itself after the flags give them. `how` is "default" when the assignment
    only fills a value left unset (under `if self.x is None:`, so a given value stays), else "set";
    `when` is the condition of the `if`s around it, as source in the class's
    scope ("" when none; UNKNOWN_CONDITION inside a loop, `try`, `with` or `match`); sorted."""
    out: set[tuple[str, str, str, str, int, str]] = set()
    names = sorted(n for n in reader.modules.by_name if n == ENGINE_MODULE or n.startswith(CONFIG_PACKAGE + "."))
    for name in names:
        module = reader.modules.get(name)
        if module is None:
            continue
        for cls in module.tree.body:
            if isinstance(cls, ast.ClassDef) and (cls.name.endswith("Config") or cls.name == "EngineArgs"):
                out |= {(cls.name, *a) for a in _assignments(cls)}
    return tuple(sorted(out))


_BLOCKS = (ast.For, ast.AsyncFor, ast.While, ast.Try, ast.TryStar, ast.With, ast.AsyncWith, ast.Match)


def _assignments(cls: ast.ClassDef) -> list[tuple[str, str, str, int, str]]:
    """(attribute, how, method, line, when) of each assignment to `self.<attribute>` in the class's methods."""
    found: list[tuple[str, str, str, int, str]] = []
    stack: list[tuple[ast.AST, tuple[ast.expr, ...], str, bool]] = [(cls, (), "", True)]
    seen = 0
    while stack and seen < MAX_NODES:
        n, tests, method, certain = stack.pop()
        seen += 1
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and not method:
            method = n.name
        builds = cls.name == "EngineArgs" and method == "create_engine_config"
        when = " and ".join(f"({ast.unparse(t)})" if len(tests) > 1 else ast.unparse(t) for t in tests) \
            if certain else UNKNOWN_CONDITION
        targets: list[ast.expr] = []
        if isinstance(n, ast.Assign):
            targets = [t for t in n.targets for t in (t.elts if isinstance(t, ast.Tuple) else [t])]
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign)):
            targets = [n.target]
        elif isinstance(n, ast.Call) and ast.unparse(n.func) == "object.__setattr__" and len(n.args) >= 2 \
                and isinstance(n.args[1], ast.Constant) and isinstance(n.args[1].value, str):
            how = "default" if _fills_unset(n.args[1].value, tests) else "set"
            found.append((n.args[1].value, how, method, n.lineno, when))
        for t in targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                how = "default" if isinstance(n, ast.Assign) and _fills_unset(t.attr, tests) else "set"
                found.append((t.attr, how, method, t.lineno, when))
            elif isinstance(t, ast.Attribute) and _config_holder(t.value, builds):  # self.kernel_config.x = ...
                found.append((f"{CONFIG_ATTRIBUTE}{_config_holder(t.value, builds)}.{t.attr}", "set", method, t.lineno,
                              when))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr" and n.args:
            holder = _config_holder(n.args[0], builds)
            if holder:  # setattr(self.kernel_config, name, ...): any of its fields
                found.append((f"{CONFIG_ATTRIBUTE}{holder}.*", "set", method, n.lineno, when))
            elif not (isinstance(n.args[0], ast.Name) and n.args[0].id == "self"):
                # setattr(config_obj, key, ...) (VllmConfig._set_config_default): any field of any config
                found.append((f"{CONFIG_ATTRIBUTE}*.*", "default" if _fills_unset_by_getattr(tests) else "set",
                              method, n.lineno, when))
        if isinstance(n, ast.If):
            stack.append((n.test, tests, method, certain))
            stack.extend((c, (*tests, n.test), method, certain) for c in n.body)
            stack.extend((c, (*tests, ast.UnaryOp(ast.Not(), n.test)), method, certain) for c in n.orelse)
        else:
            inner = certain and not isinstance(n, _BLOCKS)
            stack.extend((c, tests, method, inner) for c in ast.iter_child_nodes(n))
    return found


CONFIG_ATTRIBUTE = "@"  # `@kernel_config.x`: a field set through a config held in an attribute or a local


def _config_holder(node: ast.expr, builds: bool) -> str:
    """`self.kernel_config` -> "kernel_config"; a local `kernel_config` too where the configs are
    built (`builds`: create_engine_config, whose locals hold them; elsewhere a local may be a copy,
    as in VllmConfig.with_hf_config); else ""."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" and \
            node.attr.endswith("_config"):
        return node.attr
    if builds and isinstance(node, ast.Name) and node.id.endswith("_config"):
        return node.id
    return ""


def _fills_unset_by_getattr(tests: tuple[ast.expr, ...]) -> bool:
    """The innermost `if` is `getattr(x, key) is None`: the field is filled only when unset."""
    if not tests:
        return False
    t = tests[-1]
    return isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Is) and \
        isinstance(t.left, ast.Call) and isinstance(t.left.func, ast.Name) and t.left.func.id == "getattr" and \
        isinstance(t.comparators[0], ast.Constant) and t.comparators[0].value is None


def _fills_unset(attr: str, tests: tuple[ast.expr, ...]) -> bool:
    """The innermost `if` tests that the attribute is unset: `self.x is None` (not `not self.x`,
    which also replaces a given falsy value)."""
    if not tests:
        return False
    test = tests[-1]
    own = f"self.{attr}"
    return isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Is, ast.Eq)) and \
        ast.unparse(test.left) == own and isinstance(test.comparators[0], ast.Constant) and \
        test.comparators[0].value is None


def class_fields(reader: Reader, classes: Sequence[str]) -> tuple[tuple[tuple[str, str, JSON], ...],
                                                                  tuple[JsonField, ...]]:
    """Of the config dataclasses vLLM builds (those of create_engine_config, and those a JSON-valued
    flag parses into: `--profiler-config` -> ProfilerConfig): (class, field, default) for the
    defaults known exactly as JSON (what a field nothing sets holds, what a key the JSON leaves out
    holds), and each field's type as pydantic validates a JSON value (JsonField); both in class and
    field order."""
    from kb.config.fields import dataclass_fields, hints
    from kb.config.values import plain

    wanted = set(classes)
    defaults: list[tuple[str, str, JSON]] = []
    types: list[JsonField] = []
    names = sorted(n for n in reader.modules.by_name if n.startswith(CONFIG_PACKAGE + "."))
    found: dict[str, ClassRef] = {}
    for name in names:
        module = reader.modules.get(name) if len(found) < len(wanted) else None
        if module is None:
            continue
        for node in module.tree.body:
            if isinstance(node, ast.ClassDef) and node.name in wanted and node.name not in found:
                found[node.name] = ClassRef(module, node)
    for cls_name in sorted(found):
        early = _before_validated(found[cls_name].node)
        for f in dataclass_fields(reader, found[cls_name]):
            value, exact = plain(f.default) if f.has_default else (None, False)
            if exact:
                defaults.append((cls_name, f.name, value))
            members: list[tuple[str, tuple[JSON, ...]]] = []
            for h in hints(reader, f.annotation, f.module):
                options = tuple(plain(o)[0] for o in h.options) if h.kind == "literal" else ()
                if h.kind == "literal" and not all(plain(o)[1] and isinstance(o, (str, int)) for o in h.options):
                    members.append(("other", ()))
                else:
                    members.append((h.kind, options))
            types.append(JsonField(cls_name, f.name, tuple(members), tuple(f.constraints),
                                   f.name in early or "*" in early))
    return tuple(defaults), tuple(types)


def _returns_its_input(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Every `return` of the validator gives back its input unchanged (`return data`)."""
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args) if a.arg not in ("self", "cls")]
    if not params:
        return False
    returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
    return bool(returns) and all(isinstance(r.value, ast.Name) and r.value.id == params[0] for r in returns)


def _before_validated(cls: ast.ClassDef) -> set[str]:
    """The fields (or "*") a `@field_validator(..., mode="before" | "wrap")` of the class names, and
    every field when a `@model_validator(mode="before" | "wrap")` may change the input."""
    out: set[str] = set()
    for stmt in cls.body:
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for d in stmt.decorator_list:
            if not isinstance(d, ast.Call):
                continue
            name = d.func.attr if isinstance(d.func, ast.Attribute) else d.func.id if isinstance(d.func, ast.Name) else ""
            mode = next((k.value.value for k in d.keywords if k.arg == "mode" and isinstance(k.value, ast.Constant)),
                        "after")
            if mode not in ("before", "wrap", "plain") or (mode == "before" and _returns_its_input(stmt)):
                continue  # a before validator that only checks (returns what it is given) changes nothing
            if name == "field_validator":
                out |= {a.value for a in d.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
            elif name == "model_validator":
                out.add("*")
    return out


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


def _exits_before(body: list[ast.stmt], line: int) -> tuple[str, ...]:
    """The negated tests of the early `return`s before `line` (`if self.speculative_config is None: return None`)."""
    from kb.scan.calls import reached_when

    exits, _ = reached_when(body, line, enclosing=False)
    return tuple(ast.unparse(e) for e in exits)


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
