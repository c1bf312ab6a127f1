"""The modules of a vLLM tree, parsed on demand, and the names each binds at module level.

Only what `import`, `class`, `def` and assignments at module level (and in `if`/`try` blocks
there) bind is recorded; `if TYPE_CHECKING:` bodies are skipped, their `else:` kept, as at run
time. Bounded: at most MAX_FILES files of at most MAX_FILE_BYTES are parsed."""

from __future__ import annotations

import ast
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Optional, Union

from kb.errors import Located

MAX_FILES = 400
MAX_FILE_BYTES = 4_000_000
MAX_IMPORT_HOPS = 12


@dataclass(frozen=True)
class ImportFrom:
    module: str
    name: str


@dataclass(frozen=True)
class ImportModule:
    module: str


Binding = Union[ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef, ast.expr, ImportFrom, ImportModule]


@dataclass
class Module:
    name: str
    path: str
    tree: ast.Module
    bindings: dict[str, Binding] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    stars: list[str] = field(default_factory=list)  # modules of `from x import *`, in order


@dataclass(frozen=True)
class Found:
    """A name resolved to its definition: the module that binds it and what it binds."""

    module: Module
    name: str
    binding: Binding


def module_name(path: str) -> str:
    parts = path[:-3].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


class Modules:
    def __init__(self, paths: list[str], read: Callable[[str], bytes]) -> None:
        self.by_name = {module_name(p): p for p in paths if p.endswith(".py")}
        self.read = read
        self.parsed: dict[str, Optional[Module]] = {}
        self.warnings: list[Located] = []

    def get(self, name: str) -> Optional[Module]:
        if name in self.parsed:
            return self.parsed[name]
        path = self.by_name.get(name)
        module = None
        if path is not None and len(self.parsed) < MAX_FILES:
            module = self._parse(name, path)
        elif path is not None:
            self.warnings.append(Located(path, 1, f"not read: more than {MAX_FILES} modules followed"))
        self.parsed[name] = module
        return module

    def _parse(self, name: str, path: str) -> Optional[Module]:
        try:
            data = self.read(path)
        except (OSError, KeyError, ValueError) as e:
            self.warnings.append(Located(path, 1, f"not read: {e}"))
            return None
        if len(data) > MAX_FILE_BYTES:
            self.warnings.append(Located(path, 1, f"not read: larger than {MAX_FILE_BYTES} bytes"))
            return None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(data, filename=path)
        except SyntaxError as e:
            self.warnings.append(Located(path, e.lineno or 1, f"does not parse: {e.msg}"))
            return None
        except (ValueError, RecursionError, MemoryError) as e:
            self.warnings.append(Located(path, 1, f"does not parse: {type(e).__name__}"))
            return None
        module = Module(name, path, tree)
        _bind(module, tree.body, name, path.endswith("__init__.py"))
        return module

    def lookup(self, module: Module, name: str, hops: int = 0) -> Optional[Found]:
        """What `name` is bound to in `module`, through `from x import name` chains."""
        binding = module.bindings.get(name)
        if binding is None and hops < MAX_IMPORT_HOPS:
            for star in module.stars:
                source = self.get(star)
                found = self.lookup(source, name, hops + 1) if source is not None and source is not module else None
                if found is not None:
                    return found
        if binding is None:
            if "." in name:
                return None
            sub = self.get(f"{module.name}.{name}")  # a package's submodule, imported elsewhere
            return Found(sub, name, ImportModule(sub.name)) if sub is not None else None
        if isinstance(binding, ImportFrom):
            if hops >= MAX_IMPORT_HOPS:
                return None
            target = self.get(binding.module)
            if target is None:
                return None
            return self.lookup(target, binding.name, hops + 1)
        return Found(module, name, binding)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _absolute(module: str, level: int, target: Optional[str], package: bool) -> str:
    if level == 0:
        return target or ""
    parts = module.split(".")
    keep = len(parts) - level + (1 if package else 0)
    base = parts[:max(keep, 0)]
    return ".".join(base + ([target] if target else []))


def _bind(module: Module, body: list[ast.stmt], name: str, package: bool) -> None:
    for stmt in body:
        if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            module.bindings[stmt.name] = stmt
            module.lines[stmt.name] = stmt.lineno
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    module.bindings[target.id] = stmt.value
                    module.lines[target.id] = stmt.lineno
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            module.bindings[stmt.target.id] = stmt.value
            module.lines[stmt.target.id] = stmt.lineno
        elif type(stmt).__name__ == "TypeAlias":  # `type X = ...` (Python 3.12)
            alias_name, value = getattr(stmt, "name", None), getattr(stmt, "value", None)
            if isinstance(alias_name, ast.Name) and isinstance(value, ast.expr):
                module.bindings[alias_name.id] = value
                module.lines[alias_name.id] = stmt.lineno
        elif isinstance(stmt, ast.ImportFrom):
            source = _absolute(name, stmt.level, stmt.module, package)
            for alias in stmt.names:
                if alias.name == "*":
                    module.stars.append(source)
                    continue
                module.bindings[alias.asname or alias.name] = ImportFrom(source, alias.name)
                module.lines[alias.asname or alias.name] = stmt.lineno
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    module.bindings[alias.asname] = ImportModule(alias.name)
                else:
                    top = alias.name.split(".")[0]
                    module.bindings[top] = ImportModule(top)
                module.lines[alias.asname or alias.name.split(".")[0]] = stmt.lineno
        elif isinstance(stmt, ast.If):
            if _is_type_checking(stmt.test):
                _bind(module, stmt.orelse, name, package)
            else:
                _bind(module, stmt.body, name, package)
                _bind(module, stmt.orelse, name, package)
        elif isinstance(stmt, ast.Try):
            _bind(module, stmt.body, name, package)
            for handler in stmt.handlers:
                _bind(module, handler.body, name, package)
            _bind(module, stmt.orelse, name, package)
            _bind(module, stmt.finalbody, name, package)
