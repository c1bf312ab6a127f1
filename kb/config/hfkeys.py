"""The config.json keys vLLM reads off a model's Hugging Face config, from the source of the
files that build and check the model config (KEY_FILES, and every file under KEY_DIRS).

A read is `<hf>.key`, `getattr(<hf>, "key"[, default])`, `hasattr(<hf>, "key")` or vLLM's
`getattr_iter(<hf>, names, default)`, where `<hf>` is `hf_config`, `hf_text_config` (a name,
or an attribute such as `self.model_config.hf_text_config`), an attribute path below one
(`hf_config.vision_config.dtype` reads `vision_config.dtype`), or a local name assigned one.
Fallbacks: the names of `getattr_iter`, a `for key in [...]` loop over string constants, and
`getattr(a, "x", None) or getattr(a, "y", ...)` chains are alternatives of one another; a
`getattr` default that is itself a read falls back to it. Writes, method calls and dunders are
not keys."""

from __future__ import annotations

import ast
import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from kb.config.interp import Reader
from kb.config.modules import Module, module_name
from kb.config.refs import Frame
from kb.config.values import Unknown, plain, source_text
from kb.configmodel import JSON, ConfigKey, KeyRead

HF_OBJECTS = ("hf_config", "hf_text_config")
KEY_DIRS = ("vllm/config/",)
KEY_FILES = ("vllm/config.py", "vllm/engine/arg_utils.py", "vllm/transformers_utils/model_arch_config_convertor.py",
             "vllm/transformers_utils/config.py")
# Per-model code reads its own checkpoint's keys (and vendored code is not vLLM's): left out.
OTHER_EXCLUDED = ("vllm/model_executor/models/", "vllm/models/", "vllm/transformers_utils/configs/",
                  "vllm/third_party/", "vllm/vllm_flash_attn/")
MAX_KEY_FILES = 250
MAX_READS = 20_000
MAX_NODES = 2_000_000  # ast nodes visited over all files
MAX_PATH = 4  # attribute levels below the config object
_NOT_KEYS = {"get_text_config", "to_dict", "to_json_string", "update", "get", "architectures_", "keys", "items"}


@dataclass(frozen=True)
class _Read:
    key: str
    via: str
    default: JSON
    has_default: bool
    alternatives: tuple[str, ...]
    function: str
    file: str
    line: int


def key_files(paths: Sequence[str], read: Callable[[str], bytes]) -> list[str]:
    """The files that build and check the model config, then every other file outside the
    per-model code that names a config object (where guards read keys), at most MAX_KEY_FILES."""
    python = sorted(p for p in paths if p.endswith(".py"))
    chosen = [p for p in python if p in KEY_FILES or p.startswith(KEY_DIRS)]
    for p in python:
        if len(chosen) >= MAX_KEY_FILES:
            break
        if p in chosen or not p.startswith("vllm/") or p.startswith(OTHER_EXCLUDED):
            continue
        try:
            data = read(p)
        except (OSError, KeyError, ValueError):
            continue
        if any(name.encode() in data for name in HF_OBJECTS):
            chosen.append(p)
    return chosen[:MAX_KEY_FILES]


def read_config_keys(reader: Reader, paths: Sequence[str]) -> list[ConfigKey]:
    reads: list[_Read] = []
    budget = [MAX_NODES]
    for path in key_files(paths, reader.modules.read):
        module = reader.modules.get(module_name(path))
        if module is None:
            continue
        try:
            lines = reader.modules.read(path).decode("utf-8", "replace").splitlines()
        except (OSError, KeyError, ValueError):
            continue
        walker = _Walker(reader, module, reads, budget, lines)
        walker.body(module.tree.body, "")
        if budget[0] <= 0:
            reader.warn(module, 1, f"config.json keys not all read: more than {MAX_NODES} nodes")
            break
        if len(reads) >= MAX_READS:
            reader.warn(module, 1, f"config.json keys not all read: more than {MAX_READS} reads")
            break
    by_key: dict[str, list[KeyRead]] = {}
    for r in reads:
        by_key.setdefault(r.key, []).append(KeyRead(r.via, r.default, r.has_default, r.alternatives, r.function,
                                                    r.file, r.line))
    return [ConfigKey(k, tuple(sorted({_place(r): r for r in v}.values(), key=_place)))
            for k, v in sorted(by_key.items())]


def _place(r: KeyRead) -> tuple[str, int, str, str]:
    return (r.file, r.line, r.via, json.dumps(r.to_json(), sort_keys=True))


class _Walker:
    """One file: functions in order, each with its local aliases of config objects and its
    local lists of key names."""

    def __init__(self, reader: Reader, module: Module, reads: list[_Read], budget: list[int],
                 lines: list[str]) -> None:
        self.reader = reader
        self.module = module
        self.reads = reads
        self.budget = budget
        self.lines = lines
        self.bound: dict[str, ast.expr] = {}

    def mentions(self, node: ast.stmt, aliases: Sequence[str] = ()) -> bool:
        """Whether the statement's lines name a config object or a local alias of one (every read does)."""
        text = "\n".join(self.lines[node.lineno - 1:(node.end_lineno or node.lineno)])
        return any(name in text for name in (*HF_OBJECTS, *aliases))

    def body(self, stmts: list[ast.stmt], scope: str) -> None:
        for stmt in stmts:
            if not self.mentions(stmt):
                continue
            if isinstance(stmt, ast.ClassDef):
                self.body(stmt.body, f"{scope}{stmt.name}.")
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.function(stmt, f"{scope}{stmt.name}")
            else:
                self.visit(stmt, scope.rstrip(".") or "<module>", {}, {})

    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> None:
        aliases: dict[str, tuple[str, tuple[str, ...]]] = {}
        lists: dict[str, tuple[str, ...]] = {}
        bound: dict[str, ast.expr] = {}  # `factory = self.get_heads`: shown by what it names
        for sub in self._walk(node):
            if isinstance(sub, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
                target = sub.targets[0] if isinstance(sub, ast.Assign) and len(sub.targets) == 1 else \
                    getattr(sub, "target", None)
                value = sub.value
                if isinstance(target, ast.Name) and value is not None:
                    root = self.root(value, {})
                    if root is not None:
                        aliases[target.id] = root
                    names = self.names(value, {})
                    if names:
                        lists[target.id] = names
                    if isinstance(value, ast.Attribute):
                        bound[target.id] = value
        outer, self.bound = self.bound, bound
        self._function_body(node, name, aliases, lists)
        self.bound = outer

    def _function_body(self, node: ast.FunctionDef | ast.AsyncFunctionDef, name: str,
                       aliases: dict[str, tuple[str, tuple[str, ...]]], lists: dict[str, tuple[str, ...]]) -> None:
        for stmt in node.body:
            if not self.mentions(stmt, list(aliases)):
                continue
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.function(stmt, f"{name}.{stmt.name}")
            else:
                self.visit(stmt, name, aliases, lists)

    def _walk(self, node: ast.AST) -> list[ast.AST]:
        out = []
        for sub in ast.walk(node):
            self.budget[0] -= 1
            if self.budget[0] <= 0:
                break
            out.append(sub)
        return out

    def root(self, node: ast.expr, aliases: dict[str, tuple[str, tuple[str, ...]]]) -> \
            Optional[tuple[str, tuple[str, ...]]]:
        """(config object, attribute path below it) when `node` is one."""
        path: list[str] = []
        current = node
        while isinstance(current, ast.Attribute) and len(path) <= MAX_PATH:
            if current.attr in HF_OBJECTS:
                return current.attr, tuple(reversed(path))
            path.append(current.attr)
            current = current.value
        if isinstance(current, ast.Name) and len(path) <= MAX_PATH:
            if current.id in HF_OBJECTS:
                return current.id, tuple(reversed(path))
            if current.id in aliases:
                via, base = aliases[current.id]
                return via, base + tuple(reversed(path))
        return None

    def names(self, node: ast.expr, lists: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
        """The key names a list/tuple of string constants, a local list, or a module constant holds."""
        if isinstance(node, (ast.List, ast.Tuple)) and node.elts and \
                all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            return tuple(e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))
        if isinstance(node, ast.Name) and node.id in lists:
            return lists[node.id]
        base = node.value if isinstance(node, ast.Subscript) else node
        if isinstance(base, ast.Name) and base.id in self.module.bindings:
            value = self.reader.eval(node, Frame(self.module))  # a module constant (`ALIASES["kv_heads"]`)
            if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
                return tuple(value)
        return ()

    def visit(self, stmt: ast.stmt, function: str, aliases: dict[str, tuple[str, tuple[str, ...]]],
              lists: dict[str, tuple[str, ...]]) -> None:
        loops: dict[str, tuple[str, ...]] = dict(lists)
        handled: set[int] = set()
        nodes = self._walk(stmt)
        chained = {id(p.value) for p in nodes if isinstance(p, ast.Attribute)}
        chained |= {id(p.func) for p in nodes if isinstance(p, ast.Call)}
        for sub in nodes:
            if isinstance(sub, (ast.For, ast.comprehension)) and isinstance(sub.target, ast.Name):
                names = self.names(sub.iter, lists)
                if names:
                    loops[sub.target.id] = names
        for sub in nodes:
            if len(self.reads) >= MAX_READS:
                return
            if isinstance(sub, ast.BoolOp) and isinstance(sub.op, ast.Or):
                chain = [self.call_read(v, aliases, loops) for v in sub.values]
                keys = tuple(k for c in chain if c is not None for k in c[1])
                if len([c for c in chain if c is not None]) > 1:
                    for value, c in zip(sub.values, chain):
                        if c is not None:
                            handled.add(id(value))
                            self.record(c, function, keys, value)
            elif isinstance(sub, ast.Call) and id(sub) not in handled:
                c = self.call_read(sub, aliases, loops)
                if c is not None:
                    handled.add(id(sub))
                    self.fallbacks(sub, c, function, aliases, loops, handled)
            elif isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Load):
                self.attribute(sub, function, aliases, chained)

    def attribute(self, node: ast.Attribute, function: str, aliases: dict[str, tuple[str, tuple[str, ...]]],
                  chained: set[int]) -> None:
        root = self.root(node, aliases)
        if root is None or not root[1]:
            return
        via, path = root
        if any(k in _NOT_KEYS or k.startswith("__") for k in path):
            return
        if id(node) in chained:
            return  # a method called, or not the outermost attribute of a chain (that one is the key)
        key = ".".join(path)
        self.reads.append(_Read(key, via, None, False, (key,), function, self.module.path, node.lineno))

    def fallbacks(self, call: ast.Call, read: tuple[str, tuple[str, ...], Any, bool], function: str,
                  aliases: dict[str, tuple[str, tuple[str, ...]]], loops: dict[str, tuple[str, ...]],
                  handled: set[int]) -> None:
        """`getattr(a, "x", getattr(a, "y", 0))`: x, then y, then 0; each read records the
        whole chain as its alternatives and the chain's last default as its own."""
        chain: list[tuple[ast.Call, tuple[str, tuple[str, ...], Any, bool]]] = [(call, read)]
        while len(chain) < 20:
            last = chain[-1][0]
            fallback = last.args[2] if len(last.args) > 2 else None
            inner = self.call_read(fallback, aliases, loops)
            if inner is None or not isinstance(fallback, ast.Call):
                break
            handled.add(id(fallback))
            chain.append((fallback, inner))
        keys = tuple(k for _, r in chain for k in r[1])
        final = chain[-1][1]
        for node, r in chain:
            self.record((r[0], r[1], final[2], final[3]), function, keys, node)

    def call_read(self, node: Optional[ast.expr], aliases: dict[str, tuple[str, tuple[str, ...]]],
                  loops: dict[str, tuple[str, ...]]) -> Optional[tuple[str, tuple[str, ...], Any, bool]]:
        """(via, keys tried, default, has default) of a getattr/hasattr/getattr_iter read."""
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or len(node.args) < 2:
            return None
        kind = node.func.id
        if kind not in ("getattr", "hasattr", "getattr_iter"):
            return None
        root = self.root(node.args[0], aliases)
        if root is None:
            return None
        via, base = root
        key_node = node.args[1]
        if kind == "getattr_iter":
            keys = self.names(key_node, loops)
        elif isinstance(key_node, ast.Constant) and isinstance(key_node.value, str):
            keys = (key_node.value,)
        elif isinstance(key_node, ast.Name) and key_node.id in loops:
            keys = loops[key_node.id]
        else:
            keys = ()
        keys = tuple(".".join((*base, k)) for k in keys if not k.startswith("__"))
        if not keys:
            return None
        default_node = node.args[2] if len(node.args) > 2 else next(
            (k.value for k in node.keywords if k.arg == "default"), None)
        if kind == "hasattr":
            return via, keys, False, True
        if default_node is None:
            factory = next((k.value for k in node.keywords if k.arg == "default_factory"), None)
            if factory is not None:
                if isinstance(factory, ast.Name) and factory.id in self.bound:
                    factory = self.bound[factory.id]
                return via, keys, Unknown(f"{_short(factory)}()"), True
            return via, keys, None, kind == "getattr_iter"
        if not _simple(default_node):  # a call or an attribute: what it gives is the run time's
            return via, keys, Unknown(_short(default_node)), True
        return via, keys, self.reader.eval(default_node, Frame(self.module)), True

    def record(self, read: tuple[str, tuple[str, ...], Any, bool], function: str, alternatives: tuple[str, ...],
               node: ast.expr) -> None:
        via, keys, default, has = read
        value: JSON = None
        if has:
            value = default.text if isinstance(default, Unknown) else plain(default)[0]
        for key in keys:
            if len(self.reads) < MAX_READS:
                self.reads.append(_Read(key, via, value, has, tuple(dict.fromkeys(alternatives)), function,
                                        self.module.path, node.lineno))


_SIMPLE = (ast.Constant, ast.List, ast.Tuple, ast.Set, ast.Dict, ast.UnaryOp, ast.USub, ast.UAdd, ast.Not,
           ast.Name, ast.Load)


def _simple(node: ast.expr) -> bool:
    """Constants, containers of them and names: a default the reader can give without running code."""
    return all(isinstance(n, _SIMPLE) for n in itertools.islice(ast.walk(node), 200))


def _short(node: ast.AST) -> str:
    return source_text(node, 200)
