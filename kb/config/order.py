"""The order in which `EngineArgs.create_engine_config` builds vLLM's configs, read from its
source: each `XConfig(...)` it calls, and each `self.create_x_config(...)` (the config that method
returns, by its annotation, else the first `XConfig(...)` it builds), at the line of the call,
first occurrence of each class. A config's pydantic field constraints, validators and
`__post_init__` run there, so the first error a launch meets is the one of the earliest config.
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

from kb.config.interp import ClassRef, FunctionRef, Reader
from kb.config.model import JSON, Build, JsonField
from kb.config.requests import SAMPLING_CLASS, SAMPLING_MODULE

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
                inner, inner_when = next(((c, (*_exits_before(made.node.body, c.lineno, own=True), *w))
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
    names = sorted({*(n for n in reader.modules.by_name if n == ENGINE_MODULE or n.startswith(CONFIG_PACKAGE + ".")),
                    REQUEST_MODULE})
    for name in names:
        module = reader.modules.get(name)
        if module is None:
            continue
        for cls in module.tree.body:
            if isinstance(cls, ast.ClassDef) and (
                    (name == REQUEST_MODULE and cls.name == REQUEST_CLASS) or
                    (name != REQUEST_MODULE and (cls.name.endswith("Config") or cls.name == "EngineArgs"))):
                out |= {(cls.name, *a) for a in _assignments(cls)}
    return tuple(sorted(out))


_BLOCKS = (ast.For, ast.AsyncFor, ast.While, ast.Try, ast.TryStar, ast.With, ast.AsyncWith, ast.Match)


def _assignments(cls: ast.ClassDef) -> list[tuple[str, str, str, int, str]]:
    """(attribute, how, method, line, when) of each assignment to `self.<attribute>` in the class's methods."""
    found: list[tuple[str, str, str, int, str]] = []
    stack: list[tuple[ast.AST, tuple[ast.expr, ...], str, bool, _Locals]] = [(cls, (), "", True, _NO_LOCALS)]
    seen = 0
    while stack and seen < MAX_NODES:
        n, tests, method, certain, local = stack.pop()
        seen += 1
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and not method:
            method = n.name
            local = _method_locals(n)
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
            elif isinstance(t, ast.Attribute) and _config_holder(t.value, builds, local):  # self.kernel_config.x = ...
                found.append((f"{CONFIG_ATTRIBUTE}{_config_holder(t.value, builds, local)}.{t.attr}", "set", method,
                              t.lineno, when))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr" and n.args:
            holder = _config_holder(n.args[0], builds, local)
            if holder:  # setattr(self.kernel_config, name, ...): the fields `name` holds, else any of its fields
                for key in _keys_of(n.args[1] if len(n.args) > 1 else None, local):
                    found.append((f"{CONFIG_ATTRIBUTE}{holder}.{key}", "set", method, n.lineno, when))
            elif not (isinstance(n.args[0], ast.Name) and n.args[0].id == "self"):
                # setattr(config_obj, key, ...) (VllmConfig._set_config_default): any field of any config
                found.append((f"{CONFIG_ATTRIBUTE}*.*", "default" if _fills_unset_by_getattr(tests) else "set",
                              method, n.lineno, when))
        if isinstance(n, ast.If):
            stack.append((n.test, tests, method, certain, local))
            stack.extend((c, (*tests, n.test), method, certain, local) for c in n.body)
            stack.extend((c, (*tests, ast.UnaryOp(ast.Not(), n.test)), method, certain, local) for c in n.orelse)
        else:
            inner = certain and not isinstance(n, _BLOCKS)
            stack.extend((c, tests, method, inner, local) for c in ast.iter_child_nodes(n))
    return found


CONFIG_ATTRIBUTE = "@"  # `@kernel_config.x`: a field set through a config held in an attribute or a local


@dataclass(frozen=True)
class _Locals:
    """What a method's locals hold, where one assignment says it: `parallel_config =
    self.parallel_config` (alias -> the attribute), `for name in ("a", "b"):` (name -> the strings)."""

    aliases: Mapping[str, str]
    strings: Mapping[str, tuple[str, ...]]


_NO_LOCALS = _Locals({}, {})


def _method_locals(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> _Locals:
    """The locals of a method bound exactly once (nested functions and classes left out): those
    bound to a config attribute of `self`, and loop names over a literal tuple or list of strings."""
    bound: dict[str, list[ast.AST]] = {}
    stack: list[ast.AST] = list(ast.iter_child_nodes(fn))
    seen = 0
    while stack and seen < MAX_NODES:
        n = stack.pop()
        seen += 1
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            bound.setdefault(n.id, []).append(n)
        elif isinstance(n, ast.arg):
            bound.setdefault(n.arg, []).extend([n, n])  # a parameter: never a known alias
        stack.extend(ast.iter_child_nodes(n))
    for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs:
        bound.setdefault(a.arg, []).extend([a, a])
    aliases: dict[str, str] = {}
    strings: dict[str, tuple[str, ...]] = {}
    once = {name for name, at in bound.items() if len(at) == 1}
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) and \
                n.targets[0].id in once:
            holder = _config_holder(n.value, False)
            if holder:
                aliases[n.targets[0].id] = holder
        elif isinstance(n, (ast.For, ast.AsyncFor)) and isinstance(n.target, ast.Name) and n.target.id in once and \
                isinstance(n.iter, (ast.Tuple, ast.List)) and n.iter.elts and \
                all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in n.iter.elts):
            strings[n.target.id] = tuple(e.value for e in n.iter.elts
                                         if isinstance(e, ast.Constant) and isinstance(e.value, str))
    return _Locals(aliases, strings)


def _keys_of(node: Optional[ast.expr], local: _Locals) -> tuple[str, ...]:
    """The field names `setattr`'s second argument can hold: a string, a loop name over strings; "*"
    (any field) otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
        return (node.value,)
    if isinstance(node, ast.Name) and node.id in local.strings and \
            all(k.isidentifier() for k in local.strings[node.id]):
        return local.strings[node.id]
    return ("*",)


def _config_holder(node: ast.expr, builds: bool, local: _Locals = _NO_LOCALS) -> str:
    """`self.kernel_config` -> "kernel_config"; a local `kernel_config` too where the configs are
    built (`builds`: create_engine_config, whose locals hold them; elsewhere a local may be a copy,
    as in VllmConfig.with_hf_config), or where the method's one assignment to it is
    `kernel_config = self.kernel_config`; else ""."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" and \
            node.attr.endswith("_config"):
        return node.attr
    if builds and isinstance(node, ast.Name) and node.id.endswith("_config"):
        return node.id
    if isinstance(node, ast.Name) and node.id in local.aliases:
        return local.aliases[node.id]
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


def _skips_none(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """`def v(cls, value, handler): if value is None: return value; return handler(value)`."""
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    if params and params[0] in ("cls", "self"):
        params = params[1:]
    if len(params) < 2:
        return False
    value, handler = params[0], params[1]
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(body) != 2 or not isinstance(body[0], ast.If) or body[0].orelse or len(body[0].body) != 1:
        return False
    test, skip, last = body[0].test, body[0].body[0], body[1]
    return ast.unparse(test) == f"{value} is None" and isinstance(skip, ast.Return) and skip.value is not None and \
        ast.unparse(skip.value) == value and isinstance(last, ast.Return) and last.value is not None and \
        ast.unparse(last.value) == f"{handler}({value})"


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
            if mode not in ("before", "wrap", "plain") or (mode == "before" and _returns_its_input(stmt)) or \
                    (mode == "wrap" and _skips_none(stmt)):
                continue  # a before validator that only checks (returns what it is given) changes nothing; a
                # wrap validator that only lets None through validates any other value as pydantic would
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


def _exits_before(body: list[ast.stmt], line: int, own: bool = False) -> tuple[str, ...]:
    """The negated tests of the early `return`s before `line` (`if self.speculative_config is None: return None`).
    `own`: the body is a `create_x_config` method, whose loops before an exit may fill the attribute
    the exit tests (`for flag, key, value in (...): ... self.speculative_config = {}`): the test then
    also holds when an item reaches that assignment (_filled_by_loops)."""
    from kb.scan.calls import reached_when

    exits, _ = reached_when(body, line, enclosing=False)
    return tuple(ast.unparse(_filled_by_loops(body, e) if own else e) for e in exits)


def _none_tested(e: ast.expr) -> str:
    """`not self.x is None` or `self.x is not None` -> "x"; else ""."""
    inner, negated = (e.operand, True) if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not) else (e, False)
    if not (isinstance(inner, ast.Compare) and len(inner.ops) == 1 and isinstance(inner.comparators[0], ast.Constant)
            and inner.comparators[0].value is None and isinstance(inner.left, ast.Attribute)
            and isinstance(inner.left.value, ast.Name) and inner.left.value.id == "self"):
        return ""
    if (negated and isinstance(inner.ops[0], ast.Is)) or (not negated and isinstance(inner.ops[0], ast.IsNot)):
        return inner.left.attr
    return ""


def _assigns(node: ast.AST, attr: str) -> bool:
    """The statement assigns `self.<attr>` somewhere inside (not in a nested function)."""
    for n in ast.walk(node):
        targets: list[ast.expr] = []
        if isinstance(n, ast.Assign):
            targets = [t for tg in n.targets for t in (tg.elts if isinstance(tg, ast.Tuple) else [tg])]
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign)):
            targets = [n.target]
        if any(isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name) and t.value.id == "self"
               for t in targets):
            return True
    return False


def _filled_by_loops(body: list[ast.stmt], e: ast.expr) -> ast.expr:
    """The exit's negated test `not self.x is None`, where the loops before the exit fill `self.x`
    with a value that is not None: `<item 1 reaches it> or <item 2 reaches it> or ... or not self.x is None`
    (the items of a literal tuple substituted for the loop's names), so that the test reads what the
    method is given. Unchanged when the method sets the attribute any other way before the exit."""
    attr = _none_tested(e)
    exit_at = next((s for s in body if attr and isinstance(s, ast.If) and _exit_of(s) and
                    _none_tested(_not(s.test)) == attr), None)
    if exit_at is None:
        return e
    reached: list[ast.expr] = []
    for stmt in body:
        if stmt is exit_at:
            break
        if not _assigns(stmt, attr):
            continue
        items = _loop_items(stmt)
        condition = _fills(stmt.body, attr) if items is not None and isinstance(stmt, ast.For) else None
        if items is None or condition is None or not isinstance(stmt, ast.For):
            return e
        for item in items:
            reached.append(_bound_to(condition, stmt.target, item))
    if not reached:
        return e
    return ast.BoolOp(ast.Or(), [*reached, e])


def _not(test: ast.expr) -> ast.expr:
    return ast.UnaryOp(ast.Not(), test)


def _exit_of(stmt: ast.If) -> bool:
    return len(stmt.body) == 1 and isinstance(stmt.body[0], ast.Return) and not stmt.orelse


def _loop_items(stmt: ast.stmt) -> Optional[list[ast.expr]]:
    """The items of `for <names> in (<item>, ...)`: a literal tuple or list, each item a tuple of as
    many parts as the names (or anything, for one name)."""
    if not isinstance(stmt, ast.For) or stmt.orelse or not isinstance(stmt.iter, (ast.Tuple, ast.List)):
        return None
    target = stmt.target
    if isinstance(target, ast.Name):
        return list(stmt.iter.elts)
    if not (isinstance(target, ast.Tuple) and all(isinstance(t, ast.Name) for t in target.elts)):
        return None
    if not all(isinstance(i, ast.Tuple) and len(i.elts) == len(target.elts) for i in stmt.iter.elts):
        return None
    return list(stmt.iter.elts)


_NOT_NONE = (ast.Dict, ast.List, ast.Set, ast.Tuple, ast.DictComp, ast.ListComp, ast.SetComp)


def _fills(body: list[ast.stmt], attr: str) -> Optional[ast.expr]:
    """The condition under which one pass of the loop body reaches `self.<attr> = <a display>`
    (`if value is None: continue` before it: `not value is None`; an `if self.<attr> is None:`
    around it adds nothing, since the attribute is not None after it either way); None when the
    body sets it otherwise, or may leave the loop another way."""
    conditions: list[ast.expr] = []
    for stmt in body:
        if isinstance(stmt, ast.If) and len(stmt.body) == 1 and isinstance(stmt.body[0], ast.Continue)                 and not stmt.orelse and not _assigns(stmt.test, attr):
            conditions.append(_not(stmt.test))
            continue
        if isinstance(stmt, ast.If) and len(stmt.body) == 1 and _is_fill(stmt.body[0], attr) and not stmt.orelse:
            if _none_tested(_not(stmt.test)) != attr:
                conditions.append(stmt.test)
            return ast.BoolOp(ast.And(), conditions) if len(conditions) > 1 else                 conditions[0] if conditions else ast.Constant(True)
        if _is_fill(stmt, attr):
            return ast.BoolOp(ast.And(), conditions) if len(conditions) > 1 else                 conditions[0] if conditions else ast.Constant(True)
        if _assigns(stmt, attr) or any(isinstance(n, (ast.Return, ast.Break, ast.Continue, ast.Yield))
                                       for n in ast.walk(stmt)):
            return None
    return None


def _is_fill(stmt: ast.stmt, attr: str) -> bool:
    return isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Attribute) \
        and stmt.targets[0].attr == attr and isinstance(stmt.targets[0].value, ast.Name) and \
        stmt.targets[0].value.id == "self" and isinstance(stmt.value, _NOT_NONE)


def _bound_to(condition: ast.expr, target: ast.expr, item: ast.expr) -> ast.expr:
    """The condition with the loop's names replaced by the parts of one item."""
    names = [target] if isinstance(target, ast.Name) else list(target.elts) if isinstance(target, ast.Tuple) else []
    parts = [item] if isinstance(target, ast.Name) else list(item.elts) if isinstance(item, ast.Tuple) else []
    values = {n.id: p for n, p in zip(names, parts) if isinstance(n, ast.Name)}

    class _Bind(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.expr:
            return copy.deepcopy(values[node.id]) if node.id in values and isinstance(node.ctx, ast.Load) else node

    out = _Bind().visit(copy.deepcopy(condition))
    assert isinstance(out, ast.expr)
    return out


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


def name_filled(reader: Reader) -> tuple[tuple[str, str, str, str], ...]:
    """(class, setter, holder, field) for the fields a config class's by-name default setter can fill
    (`setattr(config_obj, key, value)` under `getattr(config_obj, key) is None`, as
    VllmConfig._set_config_default): read where the setter is only called from a function walking a
    dict (`for key, value in defaults.items()`), down into nested dicts, that the class calls only
    with module-level dict literals (OPTIMIZATION_LEVEL_TO_CONFIG[...] of OPTIMIZATION_LEVEL_00...).
    Holder "" is the class's own field, else the attribute naming the config (`compilation_config`,
    `pass_config`). (class, setter, "*", "*") when it is not read so."""
    out: list[tuple[str, str, str, str]] = []
    names = sorted(n for n in reader.modules.by_name if n.startswith(CONFIG_PACKAGE + "."))
    for name in names:
        module = reader.modules.get(name)
        if module is None:
            continue
        for cls in module.tree.body:
            if not isinstance(cls, ast.ClassDef):
                continue
            setters = [f.name for f in cls.body if isinstance(f, ast.FunctionDef) and _by_name_setter(f)]
            for setter in setters:
                filled = _filled_by(reader, module.tree, cls, setter)
                out += [(cls.name, setter, *f) for f in filled] if filled is not None else [(cls.name, setter, "*", "*")]
    return tuple(sorted(set(out)))


def _by_name_setter(fn: ast.FunctionDef) -> bool:
    """`def f(self, obj, key, value): if getattr(obj, key) is None: setattr(obj, key, ...)`."""
    params = [a.arg for a in fn.args.args]
    if len(params) != 4 or params[0] != "self":
        return False
    obj, key = params[1], params[2]
    for n in ast.walk(fn):
        if isinstance(n, ast.If) and ast.unparse(n.test) == f"getattr({obj}, {key}) is None" and \
                any(isinstance(c, ast.Call) and ast.unparse(c.func) == "setattr" and len(c.args) == 3 and
                    ast.unparse(c.args[0]) == obj and ast.unparse(c.args[1]) == key for s in n.body for c in ast.walk(s)):
            return True
    return False


def _calls_of(node: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Call) and
            ((isinstance(n.func, ast.Attribute) and n.func.attr == name) or (isinstance(n.func, ast.Name) and n.func.id == name))]


def _filled_by(reader: Reader, tree: ast.Module, cls: ast.ClassDef, setter: str) -> Optional[list[tuple[str, str]]]:
    calls = _calls_of(tree, setter)
    walkers: list[tuple[ast.FunctionDef, ast.FunctionDef]] = []  # (method, nested walker)
    for method in cls.body:
        if not isinstance(method, ast.FunctionDef):
            continue
        for inner in method.body:
            if isinstance(inner, ast.FunctionDef) and _calls_of(inner, setter):
                walkers.append((method, inner))
    in_walkers = sum(len(_calls_of(w, setter)) for _, w in walkers)
    if not walkers or in_walkers != len(calls):
        return None  # the setter is called elsewhere too
    out: list[tuple[str, str]] = []
    for method, walker in walkers:
        params = [a.arg for a in walker.args.args]
        if len(params) != 2 or not _walks(walker, setter, params):
            return None
        start = [c for c in _calls_of(method, walker.name) if not _inside(walker, c)]
        outer = [a.arg for a in method.args.args]
        if len(start) != 1 or len(outer) != 2 or [ast.unparse(a) for a in start[0].args] != ["self", outer[1]]:
            return None
        for call in _calls_of(tree, method.name):
            if len(call.args) != 1 or call.keywords:
                return None
            tables = _dict_tables(reader, tree, call)
            if tables is None:
                return None
            for table in tables:
                keys = _keys_filled(table, "")
                if keys is None:
                    return None
                out += keys
    return out


def _keys_filled(table: ast.Dict, holder: str) -> Optional[list[tuple[str, str]]]:
    """(holder, field) for each key of a defaults dict, and for a nested dict its keys, as fields of
    the config the key names (the walker sets only the keys it finds)."""
    out: list[tuple[str, str]] = []
    for k, v in zip(table.keys, table.values):
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
            return None
        out.append((holder, k.value))
        if isinstance(v, ast.Dict):
            inner = _keys_filled(v, k.value)
            if inner is None:
                return None
            out += inner
    return out


def _inside(outer: ast.AST, node: ast.AST) -> bool:
    return any(n is node for n in ast.walk(outer))


def _walks(walker: ast.FunctionDef, setter: str, params: list[str]) -> bool:
    """The walker calls the setter only as `self.<setter>(<obj>, key, value)` in `for key, value in
    <dict>.items():`, and itself only on `value`."""
    obj, table = params
    for loop in ast.walk(walker):
        if not isinstance(loop, ast.For):
            continue
        if not (isinstance(loop.target, ast.Tuple) and len(loop.target.elts) == 2 and
                ast.unparse(loop.iter) == f"{table}.items()"):
            continue
        key, value = (ast.unparse(e) for e in loop.target.elts)
        calls = _calls_of(loop, setter)
        if calls and all([ast.unparse(a) for a in c.args] == [obj, key, value] for c in calls) and \
                all(len(c.args) == 2 and ast.unparse(c.args[1]) == value for c in _calls_of(loop, walker.name)):
            return len(calls) == len(_calls_of(walker, setter))
    return False


def _dict_tables(reader: Reader, tree: ast.Module, call: ast.Call) -> Optional[list[ast.Dict]]:
    """The module-level dict literals a call's one argument is: `NAME[...]` of a dict of them, or a
    local assigned once to that, in the calling function."""
    arg = call.args[0]
    if isinstance(arg, ast.Name):
        fn = next((f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and _inside(f, call)
                   and not any(isinstance(g, (ast.FunctionDef, ast.AsyncFunctionDef)) and g is not f and _inside(g, call)
                               and _inside(f, g) for g in ast.walk(f))), None)
        assigns = [a for a in ast.walk(fn) if isinstance(a, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == arg.id for t in a.targets)] if fn is not None else []
        if len(assigns) != 1 or len(assigns[0].targets) != 1:
            return None
        arg = assigns[0].value
    if isinstance(arg, ast.Subscript):
        arg = arg.value
        table = _module_dict(tree, arg)
        if table is None:
            return None
        out = [_module_dict(tree, v) for v in table.values]
        return None if any(t is None for t in out) else [t for t in out if t is not None]
    table = _module_dict(tree, arg)
    return [table] if table is not None else None


def _module_dict(tree: ast.Module, node: ast.expr) -> Optional[ast.Dict]:
    if isinstance(node, ast.Dict):
        return node
    if not isinstance(node, ast.Name):
        return None
    bound = [s for s in tree.body if isinstance(s, (ast.Assign, ast.AnnAssign)) and any(
        isinstance(t, ast.Name) and t.id == node.id for t in (s.targets if isinstance(s, ast.Assign) else [s.target]))]
    if len(bound) != 1 or not isinstance(bound[0].value, ast.Dict):
        return None
    return bound[0].value


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
