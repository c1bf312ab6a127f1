"""The configuration reader's state, its budget, and its lookups: a name in a module, an
attribute of a module, a class's bases, method resolution order and attributes, a config class
built with its defaults. kb/config/interp.py is the reader; the other parts build on this one."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Optional, Union

from kb.config.fields import dataclass_fields, field_spec, is_dataclass
from kb.config.modules import Found, ImportFrom, ImportModule, Module, Modules
from kb.config.refs import Budget, ClassRef, Frame, FunctionRef
from kb.config.values import (
    SUPPRESS_TEXT,
    Builtin,
    EnumMember,
    FieldKwargs,
    Instance,
    ModuleRef,
    Parser,
    Unknown,
)
from kb.errors import Located

MAX_STEPS = 3_000_000
MAX_CALL_DEPTH = 12
MAX_LOOP = 2_000
SUPPRESS = SUPPRESS_TEXT


class Return(Exception):
    """A `return` of the function run, carrying its value out of the statements."""

    def __init__(self, value: Any) -> None:
        self.value = value


PLAIN = (type(None), bool, int, float, str)
VALUES = (*PLAIN, list, tuple, dict)
# The few standard-library constants vLLM uses as defaults (the library is not in the tree).
_STDLIB_CONSTANTS: dict[str, Any] = {"ssl.CERT_NONE": 0, "ssl.CERT_OPTIONAL": 1, "ssl.CERT_REQUIRED": 2}
# Exceptions that applying Python's operators to the reader's values can raise: the value
# becomes Unknown, the statement is skipped.
VALUE_ERRORS = (TypeError, ValueError, KeyError, IndexError, AttributeError, ZeroDivisionError, OverflowError)


class Lookup:
    """The reader's state and lookups; evaluating (kb/config/expressions.py) and calling
    (kb/config/interp.py) are the parts built on it."""

    def __init__(self, modules: Modules) -> None:
        self.modules = modules
        self.steps = 0
        self.depth = 0
        self.parser = Parser()
        self.warnings: list[Located] = []
        self.kwargs_cache: dict[tuple[str, str], dict[str, FieldKwargs]] = {}
        self.instances: dict[tuple[str, str], Instance] = {}
        self.building: set[tuple[str, str]] = set()
        self.env_tables: dict[str, Any] = {}
        self.unfollowed = 0  # statements reached whose effect on the control flow was not followed

    # --- bookkeeping ------------------------------------------------------------------------
    def step(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise Budget(f"more than {MAX_STEPS} steps")

    def warn(self, module: Module, node: Union[ast.AST, int], message: str) -> None:
        line = node if isinstance(node, int) else getattr(node, "lineno", 1)
        if len(self.warnings) < 1_000:
            self.warnings.append(Located(module.path, line, message))

    @contextmanager
    def call_depth(self) -> Iterator[bool]:
        self.depth += 1
        try:
            yield self.depth <= MAX_CALL_DEPTH
        finally:
            self.depth -= 1

    # --- names ------------------------------------------------------------------------------
    def global_value(self, module: Module, name: str) -> Any:
        found = self.modules.lookup(module, name)
        if found is None:
            binding = module.bindings.get(name)
            if isinstance(binding, ImportFrom):  # from a module outside the tree
                return Builtin(f"{binding.module}.{binding.name}")
            return Builtin(name)
        return self.found_value(found)

    def found_value(self, found: Found) -> Any:
        b = found.binding
        if isinstance(b, ast.ClassDef):
            return ClassRef(found.module, b)
        if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return FunctionRef(found.module, b)
        if isinstance(b, ImportModule):
            return ModuleRef(b.module)
        if isinstance(b, ImportFrom):
            return Builtin(f"{b.module}.{b.name}")
        key = (found.module.name, found.name)
        if key in self.building:  # a module constant defined through itself
            return Unknown(found.name)
        self.building.add(key)
        try:
            return self.eval(b, Frame(found.module))
        finally:
            self.building.discard(key)

    def module_attr(self, ref: ModuleRef, attr: str) -> Any:
        module = self.modules.get(ref.name)
        if module is None:
            sub = self.modules.get(f"{ref.name}.{attr}")
            if sub is not None:
                return ModuleRef(sub.name)
            if ref.name == "argparse" and attr == "SUPPRESS":
                return SUPPRESS
            if ref.name == "os" and attr == "environ":
                return {}  # the environment is empty: what a getter returns when nothing is set
            return _STDLIB_CONSTANTS.get(f"{ref.name}.{attr}", Builtin(f"{ref.name}.{attr}"))
        if attr not in module.bindings:
            sub = self.modules.get(f"{ref.name}.{attr}")
            if sub is not None:
                return ModuleRef(sub.name)
            if "environment_variables" in module.bindings and "__getattr__" in module.bindings:
                return self.env_default(module, attr)
        return self.global_value(module, attr)

    def env_default(self, module: Module, name: str) -> Any:
        """`envs.VLLM_X` (vllm/envs.py answers it from `environment_variables`): its value in an
        empty environment, i.e. the default its getter gives."""
        if module.name not in self.env_tables:
            self.env_tables[module.name] = self.global_value(module, "environment_variables")
        table = self.env_tables[module.name]
        getter = table.get(name) if isinstance(table, dict) else None
        if getter is None:
            return Unknown(f"{module.name}.{name}")
        return self.call(getter, [], {}, Frame(module), ast.Name(name))

    # --- classes ----------------------------------------------------------------------------
    def bases(self, cls: ClassRef) -> list[Any]:
        out = []
        for b in cls.node.bases:
            target = b.value if isinstance(b, ast.Subscript) else b
            out.append(self.eval(target, Frame(cls.module)))
        return out

    def mro(self, cls: ClassRef) -> list[ClassRef]:
        """Depth-first, left to right, each class after its subclasses (enough for vLLM's
        single-inheritance config and argument classes)."""
        order: list[ClassRef] = []
        todo: list[tuple[ClassRef, int]] = [(cls, 0)]
        while todo and len(order) < 50:
            current, level = todo.pop(0)
            if level > 20:
                break
            if current in order:
                order.remove(current)
            order.append(current)
            todo[:0] = [(b, level + 1) for b in self.bases(current) if isinstance(b, ClassRef)]
        seen: list[ClassRef] = []
        for c in reversed(order):  # keep the last occurrence of each class
            if c not in seen:
                seen.insert(0, c)
        return seen

    def base_names(self, cls: ClassRef) -> set[str]:
        names: set[str] = set()
        for c in self.mro(cls):
            for b in c.node.bases:
                target = b.value if isinstance(b, ast.Subscript) else b
                names.add(target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", ""))
        return names

    def is_enum(self, cls: ClassRef) -> bool:
        return bool(self.base_names(cls) & {"Enum", "IntEnum", "StrEnum", "Flag", "IntFlag"})

    def class_attr(self, cls: ClassRef, attr: str, start_after: Optional[ClassRef] = None) -> Any:
        if attr == "__name__":
            return cls.name
        if attr == "__doc__":
            doc = ast.get_docstring(cls.node, clean=False)
            return doc
        key = (cls.module.name, f"{cls.name}.{attr}")
        if key in self.building:  # `class Y(X): v = X.v` with X subclassing Y
            return Unknown(f"{cls.name}.{attr}")
        self.building.add(key)
        try:
            return self._class_attr(cls, attr, start_after)
        finally:
            self.building.discard(key)

    def _class_attr(self, cls: ClassRef, attr: str, start_after: Optional[ClassRef]) -> Any:
        chain = self.mro(cls)
        if start_after is not None and start_after in chain:
            chain = chain[chain.index(start_after) + 1:]
        for owner in chain:
            for stmt in owner.node.body:
                found = self._class_member(cls, owner, stmt, attr)
                if found is not _MISSING:
                    return found
        return Unknown(f"{cls.name}.{attr}")

    def _class_member(self, cls: ClassRef, owner: ClassRef, stmt: ast.stmt, attr: str) -> Any:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == attr:
            decorators = {d.id if isinstance(d, ast.Name) else getattr(d, "attr", "") for d in stmt.decorator_list}
            if "staticmethod" in decorators:
                return FunctionRef(owner.module, stmt, cls, owner)
            if "classmethod" in decorators:
                return FunctionRef(owner.module, stmt, cls, owner, bound=(cls,))
            return FunctionRef(owner.module, stmt, cls, owner, bound=(Unknown("self"),))
        if isinstance(stmt, ast.ClassDef) and stmt.name == attr:
            return ClassRef(owner.module, stmt)
        value: Optional[ast.expr] = None
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == attr:
            if stmt.value is None:
                return _MISSING
            value = stmt.value
        elif isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == attr for t in stmt.targets):
            value = stmt.value
        if value is None:
            return _MISSING
        if self.is_enum(owner):
            return EnumMember(owner.name, attr, self.eval(value, Frame(owner.module)))
        # an empty container on a plain class is a registry that imports fill at run time
        # (`ReasoningParserManager.reasoning_parsers`): its contents are not in the source
        if _empty_container(value) and not is_dataclass(self, owner):
            return Unknown(f"{owner.name}.{attr}")
        spec = field_spec(self, value, Frame(owner.module))
        if spec is not None:  # a dataclass field: the class attribute is its default, if it has one
            return spec.default if not spec.factory else Unknown(f"{cls.name}.{attr}")
        return self.eval(value, Frame(owner.module))

    def instance(self, cls: ClassRef) -> Any:
        """The config class built with its defaults (`default_factory=CacheConfig`)."""
        key = (cls.module.name, cls.name)
        if key in self.instances:
            return self.instances[key]
        if key in self.building:
            return Unknown(f"{cls.name}()")
        self.building.add(key)
        try:
            fields = tuple((f.name, f.default) for f in dataclass_fields(self, cls) if f.repr)
        finally:
            self.building.discard(key)
        made = Instance(cls.name, fields)
        self.instances[key] = made
        return made

    def eval(self, node: ast.expr, frame: Frame, depth: int = 0) -> Any:
        """An expression's value: kb/config/expressions.py."""
        raise NotImplementedError

    def call(self, func: Any, args: list[Any], kwargs: dict[str, Any], frame: Frame, node: ast.expr) -> Any:
        """A call's value: kb/config/interp.py."""
        raise NotImplementedError

    def run_function(self, func: FunctionRef, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """A function of the tree run with these arguments: kb/config/interp.py."""
        raise NotImplementedError


_MISSING = object()


def _empty_container(node: ast.expr) -> bool:
    if isinstance(node, ast.Dict):
        return not node.keys
    if isinstance(node, (ast.List, ast.Set)):
        return not node.elts
    return False


def source_text(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except (ValueError, RecursionError, AttributeError, TypeError):
        return "<expression>"
    return text if len(text) <= 300 else text[:300] + "…"
