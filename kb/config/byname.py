"""VllmConfig's by-name defaults: the methods that fill configs' fields by name from tables
(`setattr(config, key, value)` over a dict of defaults), and which (config, field) each can fill,
where the tables are read whole."""

from __future__ import annotations

import ast
from typing import Optional

from kb.config.interp import Reader
from kb.config.order import (
    CONFIG_PACKAGE,
)


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
