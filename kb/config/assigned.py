"""Where vLLM's own code sets a config's field (`self.x = ...` in a config's methods, `setattr`
through a config held in an attribute or a local), how (set, or a default filled where unset) and
under which condition: a flag's value at a guard is the parser's only where nothing sets it first."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

from kb.config.interp import Reader
from kb.config.order import (
    CONFIG_PACKAGE,
    ENGINE_MODULE,
    MAX_NODES,
    REQUEST_CLASS,
    REQUEST_MODULE,
    UNKNOWN_CONDITION,
)


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
