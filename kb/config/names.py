"""What the module-level names that vLLM's config code reads hold, read from the tree: a guard
of vllm/config/ or vllm/engine/arg_utils.py that reads `KV_CACHE_DTYPES`, `get_args(SpeculativeMethod)`
or `registered_speculative_methods()` is decided with these values (kb/checks/derive.py).

- a constant: a name bound once, at module level, to a literal (a string, a number, a tuple,
  list, set, frozenset or dict of them) that its module never changes;
- a `Literal[...]` type alias, as `get_args` gives it (nested aliases flattened, as typing does);
- an `enum.Flag` / `enum.IntFlag` class of numbered members (`KVCacheAccess.EXPORTS_FD in access`);
- a registry only plugins fill: a function that returns a module-level container that starts
  empty (`return sorted(_CUSTOM_CONFIGS)`), where only functions fill it that nothing in the tree
  calls (`register_speculative_method`, for a vLLM plugin). kb checks a launch of vLLM as
  installed, without plugins: such a registry is empty.

Each is recorded for the file that reads it, by the name written there (imports followed)."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Optional

from kb.config.interp import Reader
from kb.config.modules import Found, ImportFrom, ImportModule, Modules, module_name
from kb.config.refs import Budget
from kb.config.values import LiteralType, SetValue
from kb.configmodel import JSON

LAUNCH_FILES = ("vllm/config/", "vllm/engine/arg_utils.py", "vllm/sampling_params.py")  # and the request model
MAX_ITEMS = 2_000  # items of one value kept
MAX_SCANNED = 60  # files parsed to find who calls a registry's filling function
_PLAIN = (type(None), bool, int, float, str)
_MUTATORS = frozenset({"append", "extend", "insert", "add", "update", "setdefault", "pop", "popitem", "remove",
                       "discard", "clear", "__setitem__", "__delitem__", "sort", "reverse"})
_CONTAINERS = {"sorted": "list", "list": "list", "tuple": "tuple", "set": "set", "frozenset": "set"}


def module_names(modules: Modules, paths: Sequence[str], read: Callable[[str], bytes]) -> tuple[tuple[str, str, str, JSON], ...]:
    """(file, name, kind, value) for the names the launch files read: kind `value` (the value as
    JSON, tagged: kb/checks/facts.py `constant_value`), `literal` (get_args of the alias), `call`
    (what calling it with no argument returns) or `enum` (a flag enum's members)."""
    reader = Reader(modules)
    tree = _Tree(paths, read)
    out: list[tuple[str, str, str, JSON]] = []
    for path in sorted(p for p in paths if p.startswith(LAUNCH_FILES) and p.endswith(".py")):
        module = modules.get(module_name(path))
        if module is None:
            continue
        shadowed = _local_names(module.tree)
        for name, called in sorted(_names_read(module.tree)):
            if name in shadowed or not (called or any(c.isupper() for c in name)):
                continue  # a constant or a type alias is named with capitals; a registry is called
            found = modules.lookup(module, name)
            if found is None or isinstance(found.binding, (ImportFrom, ImportModule)):
                continue
            try:
                got = _call_value(modules, found, tree) if called else \
                    _flag_enum(found) if isinstance(found.binding, ast.ClassDef) else _value(reader, modules, found)
            except (Budget, RecursionError):
                got = None
            if got is not None:
                out.append((path, name, *got))
    return tuple(out)


_TESTS = (ast.Compare, ast.BoolOp, ast.UnaryOp)


def _names_read(tree: ast.Module) -> Iterator[tuple[str, bool]]:
    """The names the module reads in conditions (a comparison, `and`/`or`/`not`, the test of an
    `if`, a conditional expression or a comprehension, `get_args(...)`, or assigned to a local
    first), and whether each is called with no argument (`f()`)."""
    seen: set[tuple[str, bool]] = set()
    roots: list[ast.AST] = []
    for n in ast.walk(tree):
        if isinstance(n, (ast.If, ast.IfExp, ast.While, ast.Assert)):
            roots.append(n.test)
        elif isinstance(n, ast.comprehension):
            roots += [n.iter, *n.ifs]
        elif isinstance(n, _TESTS):
            roots.append(n)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "get_args":
            roots += n.args
        elif isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and n.value is not None and \
                isinstance(n.value, (ast.Name, ast.Call, ast.Tuple, ast.List, ast.Set)):
            roots.append(n.value)
    for root in roots:
        for n in ast.walk(root):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and not n.args and not n.keywords:
                seen.add((n.func.id, True))
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                seen.add((n.id, False))
    return iter(seen)


def _local_names(tree: ast.Module) -> set[str]:
    """Names some function or class body of the module binds (a parameter, a local): not read as
    the module's name anywhere, to be safe."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            for inner in ast.walk(n) if not isinstance(n, ast.Lambda) else ast.walk(n.body):
                if inner is n:
                    continue
                if isinstance(inner, ast.Name) and not isinstance(inner.ctx, ast.Load):
                    out.add(inner.id)
                elif isinstance(inner, ast.arg):
                    out.add(inner.arg)
                elif isinstance(inner, (ast.Global, ast.Nonlocal)):
                    out.update(inner.names)
            if not isinstance(n, (ast.Lambda, ast.ClassDef)):
                a = n.args
                out.update(x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs))
    return out


def _bound_once(found: Found) -> bool:
    """The name is bound by one statement of its module's top level (an `if` or `try` counted)."""
    count = 0
    for stmt in _top_statements(found.module.tree.body):
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.Assign):
            targets = [t for tg in stmt.targets for t in (tg.elts if isinstance(tg, ast.Tuple) else [tg])]
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
            targets = [stmt.target]
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.name == found.name:
            count += 1
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            count += sum((a.asname or a.name.split(".")[0]) == found.name for a in stmt.names)
        count += sum(isinstance(t, ast.Name) and t.id == found.name for t in targets)
    return count == 1


def _top_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If):
            yield from _top_statements(stmt.body)
            yield from _top_statements(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            for block in (stmt.body, *(h.body for h in stmt.handlers), stmt.orelse, stmt.finalbody):
                yield from _top_statements(block)


def _changed_in(tree: ast.Module, name: str) -> list[ast.AST]:
    """The functions (or the module itself) that change the container `name` holds, or rebind it."""
    out: list[ast.AST] = []

    def visit(node: ast.AST, owner: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else owner
            if _changes(child, name) and inner not in out:
                out.append(inner)
            visit(child, inner)

    visit(tree, tree)
    return out


def _changes(n: ast.AST, name: str) -> bool:
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) and \
            n.func.value.id == name and n.func.attr in _MUTATORS:
        return True
    if isinstance(n, (ast.Subscript, ast.Attribute)) and not isinstance(n.ctx, ast.Load) and \
            isinstance(n.value, ast.Name) and n.value.id == name:
        return True
    if isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names:
        return True
    return isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and n.target.id == name


def _value(reader: Reader, modules: Modules, found: Found) -> Optional[tuple[str, JSON]]:
    b = found.binding
    if not isinstance(b, ast.expr) or not _literal_shape(b) or not _bound_once(found):
        return None
    if isinstance(b, ast.Call) and isinstance(b.func, ast.Name) and b.func.id in ("frozenset", "set", "tuple", "list") \
            and len(b.args) <= 1 and not b.keywords:  # frozenset({...}): not followed by the reader
        value: Any = reader.eval(b.args[0], _frame(found)) if b.args else ()
        kind = "set" if b.func.id in ("frozenset", "set") else b.func.id
        if isinstance(value, SetValue):
            value = value.items
        value = _tagged(kind, value)
    else:
        got = reader.eval(b, _frame(found))
        if isinstance(got, LiteralType):
            options = _flat(got.options)
            return ("literal", list(options)) if options is not None and len(options) <= MAX_ITEMS else None
        value = _tagged(_kind(got), got.items if isinstance(got, SetValue) else got)
    if value is None:
        return None
    if value[0] in ("list", "set", "dict") and _changed_in(found.module.tree, found.name):
        return None  # a container its module changes
    return "value", value


_SHAPES = (ast.Constant, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.Name, ast.Attribute, ast.Subscript, ast.BinOp,
           ast.BitOr, ast.Add, ast.Load, ast.Call, ast.UnaryOp, ast.USub)


def _literal_shape(node: ast.expr) -> bool:
    """Written as a literal (names of other constants, `Literal[...]`, `A | B`, `frozenset({...})`
    allowed): what the reader is asked to compute, nothing larger."""
    for count, n in enumerate(ast.walk(node), 1):
        if count > 4 * MAX_ITEMS or not isinstance(n, _SHAPES):
            return False
        if isinstance(n, ast.Call) and not (isinstance(n.func, ast.Name) and n.func.id in _CONTAINERS):
            return False
    return True


def _frame(found: Found) -> Any:
    from kb.config.refs import Frame

    return Frame(found.module)


def _flat(options: tuple[Any, ...]) -> Optional[tuple[Any, ...]]:
    out: list[Any] = []
    for o in options:
        if isinstance(o, LiteralType):
            inner = _flat(o.options)
            if inner is None:
                return None
            out += inner
        elif isinstance(o, _PLAIN):
            out.append(o)
        else:
            return None
    return tuple(dict.fromkeys(out))


def _kind(value: Any) -> str:
    if isinstance(value, SetValue):
        return "set"
    if isinstance(value, tuple):
        return "tuple"
    if isinstance(value, list):
        return "list"
    if type(value) is dict:
        return "dict"
    return "const"


def _tagged(kind: str, value: Any) -> Optional[list[JSON]]:
    """[kind, JSON value] when the value is plain and small; None otherwise."""
    if kind == "const":
        return ["const", value] if isinstance(value, _PLAIN) and not (isinstance(value, float) and value != value) \
            and (not isinstance(value, str) or len(value) <= 10_000) else None
    if kind == "dict":
        if not isinstance(value, dict) or len(value) > MAX_ITEMS:
            return None
        keys = [_tagged("const", k) for k in value]
        items = [_tagged(_kind(v), v.items if isinstance(v, SetValue) else v) for v in value.values()]
        if any(k is None for k in keys) or any(v is None for v in items):
            return None
        return ["dict", [[k, v] for k, v in zip(keys, items)]]
    if not isinstance(value, (list, tuple)) or len(value) > MAX_ITEMS:
        return None
    items = [_tagged(_kind(v), v.items if isinstance(v, SetValue) else v) for v in value]
    if any(i is None for i in items) or (kind == "set" and any(i is not None and i[0] != "const" for i in items)):
        return None
    return [kind, items]


_FLAG_BASES = frozenset({"Flag", "IntFlag", "enum.Flag", "enum.IntFlag"})


def _flag_enum(found: Found) -> Optional[tuple[str, JSON]]:
    """An `enum.Flag` / `enum.IntFlag` class whose members are numbers or `auto()`: ("enum", [class,
    [[member, value], ...]]), the values as Python gives them (auto: the next power of two)."""
    cls = found.binding
    if not isinstance(cls, ast.ClassDef) or not _bound_once(found) or cls.keywords or cls.decorator_list or \
            len(cls.bases) != 1 or ast.unparse(cls.bases[0]) not in _FLAG_BASES:
        return None
    members: list[list[JSON]] = []
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) or (
                isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            continue
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            return None
        value = stmt.value
        number: Optional[int] = None
        if isinstance(value, ast.Constant) and type(value.value) is int and value.value >= 0:
            number = value.value
        elif isinstance(value, ast.Call) and not value.args and not value.keywords and \
                ast.unparse(value.func) in ("auto", "enum.auto"):
            highest = max((int(v) for _, v in members if isinstance(v, int)), default=None)
            number = 1 if highest is None else 2 ** highest.bit_length()
        if number is None or number.bit_length() > 62:
            return None
        members.append([stmt.targets[0].id, number])
    return ("enum", [cls.name, members]) if members else None


# --- registries only plugins fill ---------------------------------------------------------------
def _call_value(modules: Modules, found: Found, tree: _Tree) -> Optional[tuple[str, JSON]]:
    """What `f()` returns when f returns a registry that only uncalled functions fill: empty."""
    fn = found.binding
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or isinstance(fn, ast.AsyncFunctionDef):
        return None
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return None
    returned = body[0].value
    shape = "same"
    if isinstance(returned, ast.Call) and isinstance(returned.func, ast.Name) and returned.func.id in _CONTAINERS \
            and len(returned.args) == 1 and not returned.keywords:
        shape = _CONTAINERS[returned.func.id]
        returned = returned.args[0]
    if isinstance(returned, ast.Call) and isinstance(returned.func, ast.Attribute) and returned.func.attr == "keys" \
            and not returned.args:
        returned = returned.func.value
    if not isinstance(returned, ast.Name) or returned.id in _argument_names(fn):
        return None
    registry = modules.lookup(found.module, returned.id)
    if registry is None or registry.module is not found.module or not isinstance(registry.binding, ast.expr) or \
            not _bound_once(registry):
        return None
    start = _empty_kind(registry.binding)
    if start is None:
        return None
    fillers = _changed_in(found.module.tree, registry.name)
    if any(not isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) for f in fillers):
        return None  # filled at import time, or in a lambda
    names = {registry.name, *(f.name for f in fillers if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)))}
    if not tree.only_defined(found.module.path, found.module.tree, names, registry.name):
        return None
    return "call", [start if shape == "same" else shape, []]


def _argument_names(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    a = fn.args
    return {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}


def _empty_kind(node: ast.expr) -> Optional[str]:
    if isinstance(node, ast.Dict) and not node.keys:
        return "dict"
    if isinstance(node, ast.List) and not node.elts:
        return "list"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("dict", "list", "set") \
            and not node.args and not node.keywords:
        return node.func.id
    return None


class _Tree:
    """The tree's files, read only when a registry needs it: who names a function."""

    def __init__(self, paths: Sequence[str], read: Callable[[str], bytes]) -> None:
        self.paths = [p for p in paths if p.endswith(".py")]
        self.read = read

    def only_defined(self, home: str, home_tree: ast.Module, names: set[str], registry: str) -> bool:
        """Nothing in the tree names the functions of `names` but their own module's definitions of
        them (no call, no import, no reference), and no other module names the registry."""
        pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in sorted(names)) + r")\b")
        hits: list[str] = []
        for p in self.paths:
            try:
                text = self.read(p).decode("utf-8", "replace")
            except (OSError, KeyError, ValueError):
                return False
            if pattern.search(text):
                hits.append(p)
                if len(hits) > MAX_SCANNED:
                    return False
        functions = names - {registry}
        for p in hits:
            if p == home:
                tree = home_tree
            else:
                try:
                    tree = ast.parse(self.read(p))
                except (SyntaxError, ValueError, RecursionError, MemoryError, OSError, KeyError):
                    return False
            if _names_any(tree, functions if p == home else names, defined_ok=p == home):
                return False
        return True


def _names_any(tree: ast.Module, names: set[str], defined_ok: bool) -> bool:
    """The module reads one of the names (a Name, an attribute, an import of it); its own `def`s
    of them do not count where `defined_ok`."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and n.id in names and isinstance(n.ctx, ast.Load):
            return True
        if isinstance(n, ast.Attribute) and n.attr in names:
            return True
        if isinstance(n, (ast.ImportFrom, ast.Import)) and any(a.name.split(".")[-1] in names for a in n.names):
            return True
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in names and not defined_ok:
            return True
    return False
