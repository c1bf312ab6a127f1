"""A small, bounded reader of Python that follows how vLLM builds its `vllm serve` parser.

It walks function bodies statement by statement over the values of kb.config.values: module
names are resolved through imports (kb.config.modules), calls into the tree are followed
(`FrontendArgs.add_cli_args(parser)`, `optional_type(json.loads)`), `get_kwargs(Config)` is
computed from the config dataclass (kb.config.fields), and every `add_argument` on the parser
or one of its groups is recorded. Nothing is executed: what cannot be followed becomes
`Unknown`. An `if` whose test is unknown runs both branches. Steps, call depth and value sizes
are bounded, so hostile source ends in a warning, never a hang."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from kb.config.modules import Found, ImportFrom, ImportModule, Module, Modules
from kb.config.values import (
    MAX_ITEMS,
    SUPPRESS_TEXT,
    Builtin,
    EnumMember,
    FieldKwargs,
    Group,
    Instance,
    LiteralType,
    ModuleRef,
    Parser,
    SetValue,
    Unknown,
    bounded,
    copy_value,
)
from kb.model import Located

MAX_STEPS = 3_000_000
MAX_CALL_DEPTH = 12
MAX_EXPR_DEPTH = 100
MAX_LOOP = 2_000
MAX_ACTIONS = 5_000  # vLLM 0.33 adds 322
SUPPRESS = SUPPRESS_TEXT
# What vLLM's platform object answers where the parser reads it (`choices=[..., current_platform.device_type]`)
# on an NVIDIA GPU, the platform `kb check` assumes and vLLM's help was recorded on (bench/oracle/).
PLATFORM_OBJECT = "vllm.platforms.current_platform"


class PlatformText(str):
    """A text the platform gives (`current_platform.device_type`): what a value made from it holds
    on an NVIDIA GPU, marked so that the flag model keeps it apart (kb.config.read)."""


PLATFORM: dict[str, Any] = {"device_type": PlatformText("cuda")}


class Budget(Exception):
    """The reader's step budget is spent (hostile or unexpectedly large source)."""


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


@dataclass(frozen=True)
class ClassRef:
    module: Module
    node: ast.ClassDef

    @property
    def name(self) -> str:
        return self.node.name


@dataclass(frozen=True)
class FunctionRef:
    module: Module
    node: Union[ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda]
    cls: Optional[ClassRef] = None  # the class it was looked up on (`cls` of a classmethod)
    owner: Optional[ClassRef] = None  # the class that defines it (for super())
    bound: tuple[Any, ...] = ()  # leading arguments already given (cls, or a default instance)
    closure: Optional[dict[str, Any]] = None

    @property
    def name(self) -> str:
        return "<lambda>" if isinstance(self.node, ast.Lambda) else self.node.name


@dataclass(frozen=True)
class SuperRef:
    cls: ClassRef
    after: ClassRef


@dataclass(frozen=True)
class Method:
    """A method of a plain value or of the parser: `"a_b".replace`, `kwargs.pop`, `group.add_argument`."""

    obj: Any
    name: str


@dataclass
class Frame:
    module: Module
    locals: dict[str, Any] = field(default_factory=dict)
    cls: Optional[ClassRef] = None
    owner: Optional[ClassRef] = None


_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
    ast.BitOr: operator.or_, ast.BitAnd: operator.and_, ast.LShift: operator.lshift,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
    ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b,
}
_PLAIN = (type(None), bool, int, float, str)
_VALUES = (*_PLAIN, list, tuple, dict)
# The few standard-library constants vLLM uses as defaults (the library is not in the tree).
_STDLIB_CONSTANTS: dict[str, Any] = {"ssl.CERT_NONE": 0, "ssl.CERT_OPTIONAL": 1, "ssl.CERT_REQUIRED": 2}
_STR_METHODS = {"replace", "lower", "upper", "strip", "lstrip", "rstrip", "removeprefix", "removesuffix", "title",
                "startswith", "endswith", "split", "join", "capitalize"}
_DICT_METHODS = {"pop", "get", "items", "keys", "values", "update", "copy", "setdefault"}
_LIST_METHODS = {"remove", "append", "extend", "copy", "insert", "index", "pop"}
_PARSER_METHODS = {"add_argument", "add_argument_group", "add_mutually_exclusive_group", "set_defaults"}
# Exceptions that applying Python's operators to the reader's values can raise: the value
# becomes Unknown, the statement is skipped.
VALUE_ERRORS = (TypeError, ValueError, KeyError, IndexError, AttributeError, ZeroDivisionError, OverflowError)


def _is_number(v: Any) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) or isinstance(v, bool)


class Reader:
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
        if _empty_container(value):
            # an empty container on a plain class is a registry that imports fill at run time
            # (`ReasoningParserManager.reasoning_parsers`): its contents are not in the source
            from kb.config.fields import is_dataclass

            if not is_dataclass(self, owner):
                return Unknown(f"{owner.name}.{attr}")
        from kb.config.fields import field_spec

        spec = field_spec(self, value, Frame(owner.module))
        if spec is not None:  # a dataclass field: the class attribute is its default, if it has one
            return spec.default if not spec.factory else Unknown(f"{cls.name}.{attr}")
        return self.eval(value, Frame(owner.module))

    def instance(self, cls: ClassRef) -> Any:
        """The config class built with its defaults (`default_factory=CacheConfig`)."""
        from kb.config.fields import dataclass_fields

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

    # --- expressions ------------------------------------------------------------------------
    def eval(self, node: ast.expr, frame: Frame, depth: int = 0) -> Any:
        self.step()
        if depth > MAX_EXPR_DEPTH:
            return Unknown("<expression too deep>")
        try:
            return bounded(self._eval(node, frame, depth + 1))
        except VALUE_ERRORS:
            return Unknown(_source(node))

    def _eval(self, node: ast.expr, frame: Frame, depth: int) -> Any:
        ev = self.eval
        if isinstance(node, ast.Constant):
            return node.value if not isinstance(node.value, bytes) else Unknown("<bytes>")
        if isinstance(node, ast.Name):
            if node.id in frame.locals:
                return frame.locals[node.id]
            if node.id in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[node.id]
            return self.global_value(frame.module, node.id)
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    parts.append(str(v.value))
                    continue
                if not isinstance(v, ast.FormattedValue):
                    return Unknown(_source(node))
                x = ev(v.value, frame, depth)
                if v.format_spec is not None or v.conversion not in (-1, ord("s")) or not isinstance(x, _PLAIN):
                    return Unknown(_source(node))
                parts.append(str(x))
            return "".join(parts)
        if isinstance(node, ast.Attribute):
            return self.attribute(ev(node.value, frame, depth), node.attr, frame, node)
        if isinstance(node, ast.Subscript):
            base = ev(node.value, frame, depth)
            if isinstance(base, Builtin) and base.name.split(".")[-1] == "Literal":
                members = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
                options: list[Any] = []
                for item in members:
                    v = ev(item, frame, depth)
                    options += list(v.options) if isinstance(v, LiteralType) else [v]
                return LiteralType(tuple(options))
            index = ev(node.slice, frame, depth)
            if isinstance(base, (dict, list, tuple, str)) and isinstance(index, (str, int)):
                return base[index]  # type: ignore[index]
            return Unknown(_source(node))
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items: list[Any] = []
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    v = ev(e.value, frame, depth)
                    if not isinstance(v, (list, tuple)):
                        return Unknown(_source(node))
                    items += list(v)
                else:
                    items.append(ev(e, frame, depth))
                if len(items) > MAX_ITEMS:
                    return Unknown("<too many items>")
            if isinstance(node, ast.List):
                return items
            return tuple(items) if isinstance(node, ast.Tuple) else SetValue(tuple(items))
        if isinstance(node, ast.Dict):
            out: dict[Any, Any] = {}
            for k, v in zip(node.keys, node.values):
                if k is None:
                    spread = ev(v, frame, depth)
                    if not isinstance(spread, dict):
                        return Unknown(_source(node))
                    if not out and isinstance(spread, FieldKwargs):
                        out = spread.like(None)
                    out.update(spread)
                else:
                    key = ev(k, frame, depth)
                    if not isinstance(key, _PLAIN):
                        return Unknown(_source(node))
                    out[key] = ev(v, frame, depth)
            return out
        if isinstance(node, ast.BinOp):
            return self.binop(node, ev(node.left, frame, depth), ev(node.right, frame, depth))
        if isinstance(node, ast.UnaryOp):
            v = ev(node.operand, frame, depth)
            if isinstance(node.op, ast.Not):
                return (not v) if isinstance(v, _VALUES) else Unknown(_source(node))
            if isinstance(node.op, ast.USub) and _is_number(v):
                return -v
            if isinstance(node.op, ast.UAdd) and _is_number(v):
                return +v
            return Unknown(_source(node))
        if isinstance(node, ast.BoolOp):
            result: Any = None
            for value in node.values:
                result = ev(value, frame, depth)
                if not isinstance(result, _VALUES):
                    return Unknown(_source(node))
                if isinstance(node.op, ast.And) and not result:
                    return result
                if isinstance(node.op, ast.Or) and result:
                    return result
            return result
        if isinstance(node, ast.Compare):
            left = ev(node.left, frame, depth)
            for op, right_node in zip(node.ops, node.comparators):
                right = ev(right_node, frame, depth)
                if not (isinstance(left, _VALUES) and isinstance(right, _VALUES)):
                    return Unknown(_source(node))
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            test = ev(node.test, frame, depth)
            if isinstance(test, _PLAIN):
                return ev(node.body if test else node.orelse, frame, depth)
            return Unknown(_source(node))
        if isinstance(node, ast.Lambda):
            return FunctionRef(frame.module, node, frame.cls, frame.owner, closure=dict(frame.locals))
        if isinstance(node, ast.Call):
            return self.call_node(node, frame, depth)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)) and len(node.generators) == 1:
            return self.comprehension(node, frame, depth)
        return Unknown(_source(node))

    def comprehension(self, node: Union[ast.ListComp, ast.GeneratorExp], frame: Frame, depth: int) -> Any:
        gen = node.generators[0]
        iterable = self.iterate(self.eval(gen.iter, frame, depth))
        if iterable is None or not isinstance(gen.target, ast.Name) or gen.is_async:
            return Unknown(_source(node))
        out = []
        inner = Frame(frame.module, dict(frame.locals), frame.cls, frame.owner)
        for item in iterable[:MAX_LOOP]:
            inner.locals[gen.target.id] = item
            if all(self.eval(cond, inner, depth) is True for cond in gen.ifs):
                out.append(self.eval(node.elt, inner, depth))
        return out

    def iterate(self, value: Any) -> Optional[list[Any]]:
        if isinstance(value, (list, tuple, str)):
            return list(value)
        if isinstance(value, dict):
            return list(value)
        if isinstance(value, SetValue):
            return list(value.items)
        if isinstance(value, LiteralType):
            return None
        return None

    def binop(self, node: ast.BinOp, left: Any, right: Any) -> Any:
        op = type(node.op)
        if op not in _BINOPS:
            return Unknown(_source(node))
        if isinstance(left, str) and isinstance(right, str) and op is ast.Add:
            return left + right
        if isinstance(left, list) and isinstance(right, list) and op is ast.Add:
            return left + right
        if isinstance(left, tuple) and isinstance(right, tuple) and op is ast.Add:
            return left + right
        if _is_number(left) and _is_number(right):
            if op is ast.Pow and (abs(right) > 256 or abs(left) > 2**64):
                return Unknown(_source(node))
            if op is ast.LShift and (not isinstance(right, int) or right > 256):
                return Unknown(_source(node))
            if op is ast.Mult and (abs(left) > 2**256 or abs(right) > 2**256):
                return Unknown(_source(node))
            return _BINOPS[op](left, right)
        return Unknown(_source(node))

    def attribute(self, base: Any, attr: str, frame: Frame, node: ast.Attribute) -> Any:
        if isinstance(base, ModuleRef):
            return self.module_attr(base, attr)
        if isinstance(base, ClassRef):
            return self.class_attr(base, attr)
        if isinstance(base, SuperRef):
            return self.class_attr(base.cls, attr, start_after=base.after)
        if isinstance(base, Instance):
            return dict(base.fields).get(attr, Unknown(_source(node)))
        if isinstance(base, EnumMember):
            if attr == "value":
                return base.value
            if attr == "name":
                return base.member
        if isinstance(base, Builtin):
            if base.name in ("argparse", "argparse.argparse") and attr == "SUPPRESS":
                return SUPPRESS
            if base.name == PLATFORM_OBJECT and attr in PLATFORM:
                return PLATFORM[attr]
            return Builtin(f"{base.name}.{attr}")
        if isinstance(base, str) and attr in _STR_METHODS:
            return Method(base, attr)
        if isinstance(base, dict) and attr in _DICT_METHODS:
            return Method(base, attr)
        if isinstance(base, list) and attr in _LIST_METHODS:
            return Method(base, attr)
        if isinstance(base, (Parser, Group)) and attr in _PARSER_METHODS:
            return Method(base, attr)
        return Unknown(_source(node))

    # --- calls ------------------------------------------------------------------------------
    def call_node(self, node: ast.Call, frame: Frame, depth: int) -> Any:
        func = self.eval(node.func, frame, depth)
        args: list[Any] = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                v = self.eval(a.value, frame, depth)
                if not isinstance(v, (list, tuple)):
                    return Unknown(_source(node))
                args += list(v)
            else:
                args.append(self.eval(a, frame, depth))
        kwargs: dict[str, Any] = {}
        for k in node.keywords:
            v = self.eval(k.value, frame, depth)
            if k.arg is None:
                if not isinstance(v, dict) or not all(isinstance(key, str) for key in v):
                    return Unknown(_source(node))
                if isinstance(v, FieldKwargs) and not isinstance(kwargs, FieldKwargs):
                    kwargs = v.like(kwargs)  # `**model_kwargs["seed"]`: remember the field
                kwargs.update(v)
            else:
                kwargs[k.arg] = v
        if isinstance(func, Builtin) and func.name.split(".")[-1] == "super" and not args and frame.cls and frame.owner:
            return SuperRef(frame.cls, frame.owner)
        return self.call(func, args, kwargs, frame, node)

    def call(self, func: Any, args: list[Any], kwargs: dict[str, Any], frame: Frame, node: ast.expr) -> Any:
        if isinstance(func, Method):
            return self.method(func, args, kwargs, frame, node)
        if isinstance(func, Builtin):
            return self.builtin(func.name, args, kwargs, node)
        if isinstance(func, ClassRef):
            if self.is_enum(func):
                return Unknown(_source(node))
            return self.instance(func) if not args and not kwargs else Unknown(_source(node))
        if isinstance(func, FunctionRef):
            from kb.config.fields import NATIVE

            native = NATIVE.get(func.name)
            if native is not None and func.cls is None:
                return native(self, args, kwargs, node)
            return self.run_function(func, args, kwargs)
        return Unknown(_source(node))

    def run_function(self, func: FunctionRef, args: list[Any], kwargs: dict[str, Any]) -> Any:
        with self.call_depth() as ok:
            if not ok:
                return Unknown(f"{func.name}(...)")
            frame = Frame(func.module, dict(func.closure or {}), func.cls, func.owner)
            self.bind(func, [*func.bound, *args], kwargs, frame)
            if isinstance(func.node, ast.Lambda):
                return self.eval(func.node.body, frame)
            try:
                self.run(func.node.body, frame)
            except _Return as r:
                return r.value
            return None

    def bind(self, func: FunctionRef, args: list[Any], kwargs: dict[str, Any], frame: Frame) -> None:
        a = func.node.args
        positional = [*a.posonlyargs, *a.args]
        defaults: list[Optional[ast.expr]] = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
        for i, (param, default) in enumerate(zip(positional, defaults)):
            if i < len(args):
                frame.locals[param.arg] = args[i]
            elif param.arg in kwargs:
                frame.locals[param.arg] = kwargs.pop(param.arg)
            elif default is not None:
                frame.locals[param.arg] = self.eval(default, Frame(func.module))
            else:
                frame.locals[param.arg] = Unknown(param.arg)
        for param, kw_default in zip(a.kwonlyargs, a.kw_defaults):
            if param.arg in kwargs:
                frame.locals[param.arg] = kwargs.pop(param.arg)
            else:
                frame.locals[param.arg] = self.eval(kw_default, Frame(func.module)) if kw_default else Unknown(param.arg)
        if a.vararg:
            frame.locals[a.vararg.arg] = tuple(args[len(positional):])
        if a.kwarg:
            frame.locals[a.kwarg.arg] = dict(kwargs)

    def builtin(self, name: str, args: list[Any], kwargs: dict[str, Any], node: ast.expr) -> Any:
        short = name.split(".")[-1]
        if name in ("os.getenv", "os.environ.get") and args and isinstance(args[0], str):
            return args[1] if len(args) > 1 else kwargs.get("default")  # the environment is empty
        plain_args = all(isinstance(x, _VALUES) for x in args)
        if short in ("get_args", "typing.get_args") and len(args) == 1 and isinstance(args[0], LiteralType):
            return args[0].options
        if short == "cast" and len(args) == 2:
            return args[1]
        if short == "deepcopy" and len(args) == 1:
            return copy_value(args[0])
        if short in ("list", "tuple", "sorted", "set", "dict", "len", "int", "float", "str", "bool") and plain_args:
            if not args and not kwargs:
                return {"list": [], "tuple": (), "set": SetValue(()), "dict": {}, "int": 0, "float": 0.0,
                        "str": "", "bool": False}.get(short, Unknown(_source(node)))
            if len(args) == 1 and not kwargs:
                x = args[0]
                if short == "list":
                    return list(x)
                if short == "tuple":
                    return tuple(x)
                if short == "sorted":
                    return sorted(x)
                if short == "len":
                    return len(x)
                if short == "set":
                    return SetValue(tuple(x))
                if short == "dict" and isinstance(x, dict):
                    return dict(x)
                if short in ("int", "float", "str", "bool") and isinstance(x, _PLAIN):
                    return {"int": int, "float": float, "str": str, "bool": bool}[short](x)
            if short == "dict" and not args:
                return dict(kwargs)
        return Unknown(_source(node))

    def method(self, m: Method, args: list[Any], kwargs: dict[str, Any], frame: Frame, node: ast.expr) -> Any:
        obj, name = m.obj, m.name
        if isinstance(obj, (Parser, Group)):
            return self.parser_method(obj, name, args, kwargs, frame, node)
        if isinstance(obj, str):
            if name == "join" and len(args) == 1 and isinstance(args[0], (list, tuple)) and \
                    all(isinstance(x, str) for x in args[0]):
                return obj.join(args[0])
            if all(isinstance(x, (str, int)) and not isinstance(x, bool) for x in args) and not kwargs:
                return getattr(obj, name)(*args)
            return Unknown(_source(node))
        if isinstance(obj, dict):
            if name == "items":
                return [(k, v) for k, v in obj.items()]
            if name in ("keys", "values"):
                return list(getattr(obj, name)())
            if name == "update" and len(args) <= 1:
                obj.update(*(a for a in args if isinstance(a, dict)), **kwargs)
                return None
            if name in ("pop", "get", "setdefault") and args and isinstance(args[0], _PLAIN):
                return getattr(obj, name)(*args[:2])
            if name == "copy":
                return obj.like(dict(obj)) if isinstance(obj, FieldKwargs) else dict(obj)
            return Unknown(_source(node))
        if isinstance(obj, list):
            if name in ("remove", "index") and len(args) == 1:
                return getattr(obj, name)(args[0])
            if name == "append" and len(args) == 1 and len(obj) < MAX_ITEMS:
                obj.append(args[0])
                return None
            if name == "extend" and len(args) == 1 and isinstance(args[0], (list, tuple)):
                obj.extend(args[0][:MAX_ITEMS])
                return None
            if name == "insert" and len(args) == 2 and isinstance(args[0], int):
                obj.insert(args[0], args[1])
                return None
            if name == "copy":
                return list(obj)
            if name == "pop":
                return obj.pop(*args[:1])
        return Unknown(_source(node))

    def parser_method(self, obj: Union[Parser, Group], name: str, args: list[Any], kwargs: dict[str, Any],
                      frame: Frame, node: ast.expr) -> Any:
        if name == "add_argument_group":
            title = kwargs.get("title", args[0] if args else None)
            description = kwargs.get("description", args[1] if len(args) > 1 else None)
            group = Group(title if isinstance(title, str) else "options",
                          description if isinstance(description, str) else "")
            self.parser.groups.append(group)
            return group
        if name == "add_mutually_exclusive_group":
            return obj
        if name == "set_defaults":
            self.parser.actions.append({"__set_defaults__": dict(kwargs)})
            return None
        names = [a for a in args if isinstance(a, str)]
        if len(names) != len(args) or not names:
            self.warn(frame.module, node, f"add_argument with names that could not be read: {_source(node)[:200]}")
            return Unknown("action")
        if len(self.parser.actions) >= MAX_ACTIONS:
            raise Budget(f"more than {MAX_ACTIONS} arguments added")
        self.parser.actions.append({"names": names, "kwargs": kwargs,
                                    "group": obj.title if isinstance(obj, Group) else None,
                                    "file": frame.module.path, "line": getattr(node, "lineno", 1)})
        return Unknown("action")

    # --- statements -------------------------------------------------------------------------
    def run(self, body: list[ast.stmt], frame: Frame) -> None:
        for stmt in body:
            self.step()
            try:
                self.statement(stmt, frame)
            except VALUE_ERRORS:
                continue
            except RecursionError:
                self.warn(frame.module, stmt, "not read: nested too deeply")

    def statement(self, stmt: ast.stmt, frame: Frame) -> None:
        if isinstance(stmt, ast.Expr):
            self.eval(stmt.value, frame)
        elif isinstance(stmt, ast.Assign):
            value = self.eval(stmt.value, frame)
            for target in stmt.targets:
                self.assign(target, value, frame)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            self.assign(stmt.target, self.eval(stmt.value, frame), frame)
        elif isinstance(stmt, ast.AugAssign):
            load = _as_load(stmt.target)
            if load is not None:
                current = self.eval(load, frame)
                value = self.binop(ast.BinOp(load, stmt.op, stmt.value), current, self.eval(stmt.value, frame))
                self.assign(stmt.target, bounded(value), frame)
        elif isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                if isinstance(target, ast.Subscript):
                    container = self.eval(target.value, frame)
                    key = self.eval(target.slice, frame)
                    if isinstance(container, dict) and isinstance(key, _PLAIN):
                        container.pop(key, None)
        elif isinstance(stmt, ast.If):
            test = self.eval(stmt.test, frame)
            if isinstance(test, _VALUES):
                self.run(stmt.body if test else stmt.orelse, frame)
            else:
                self.run(stmt.body, frame)
                self.run(stmt.orelse, frame)
        elif isinstance(stmt, ast.For):
            self.loop(stmt, frame)
        elif isinstance(stmt, ast.Try):
            self.run(stmt.body, frame)
            self.run(stmt.orelse, frame)
            self.run(stmt.finalbody, frame)
        elif isinstance(stmt, ast.With):
            self.run(stmt.body, frame)
        elif isinstance(stmt, ast.Return):
            raise _Return(self.eval(stmt.value, frame) if stmt.value is not None else None)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            frame.locals[stmt.name] = FunctionRef(frame.module, stmt, frame.cls, frame.owner,
                                                  closure=frame.locals)
        elif isinstance(stmt, ast.ImportFrom):
            from kb.config.modules import _absolute

            source = _absolute(frame.module.name, stmt.level, stmt.module, frame.module.path.endswith("__init__.py"))
            imported = self.modules.get(source)
            for alias in stmt.names:
                found = self.modules.lookup(imported, alias.name) if imported is not None else None
                frame.locals[alias.asname or alias.name] = (self.found_value(found) if found is not None
                                                            else Builtin(f"{source}.{alias.name}"))
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                frame.locals[alias.asname or alias.name.split(".")[0]] = ModuleRef(
                    alias.name if alias.asname else alias.name.split(".")[0])
        elif isinstance(stmt, (ast.While, ast.Raise, ast.Assert, ast.Break, ast.Continue, ast.AsyncFor,
                               ast.AsyncWith)) or type(stmt).__name__ in ("Match", "TryStar"):
            self.unfollowed += 1  # reached, not followed: what comes after may not be what Python does

    def loop(self, stmt: ast.For, frame: Frame) -> None:
        items = self.iterate(self.eval(stmt.iter, frame))
        if items is None:
            return
        for item in items[:MAX_LOOP]:
            self.assign(stmt.target, item, frame)
            self.run(stmt.body, frame)

    def assign(self, target: ast.expr, value: Any, frame: Frame) -> None:
        if isinstance(target, ast.Name):
            frame.locals[target.id] = value
        elif isinstance(target, ast.Subscript):
            container = self.eval(target.value, frame)
            key = self.eval(target.slice, frame)
            if isinstance(container, dict) and isinstance(key, _PLAIN):
                if len(container) < MAX_ITEMS or key in container:
                    container[key] = value
            elif isinstance(container, list) and isinstance(key, int):
                container[key] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (list, tuple)) and len(value) == len(target.elts):
                for t, v in zip(target.elts, value):
                    self.assign(t, v, frame)
            else:
                for t in target.elts:
                    self.assign(t, Unknown(_source(t)), frame)


_MISSING = object()


def _empty_container(node: ast.expr) -> bool:
    if isinstance(node, ast.Dict):
        return not node.keys
    if isinstance(node, (ast.List, ast.Set)):
        return not node.elts
    return False


def _as_load(target: ast.expr) -> Optional[ast.expr]:
    if isinstance(target, (ast.Name, ast.Subscript, ast.Attribute)):
        return target
    return None


def _source(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except (ValueError, RecursionError, AttributeError, TypeError):
        return "<expression>"
    return text if len(text) <= 300 else text[:300] + "…"
