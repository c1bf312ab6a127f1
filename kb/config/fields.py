"""Config dataclasses read from source: their fields, defaults, attribute docstrings, and the
argparse keyword arguments vLLM's `get_kwargs(Config)` makes of them (vllm/engine/arg_utils.py
`_compute_kwargs`): kebab-case flags are named by the caller, the type hint decides the rest
(a dataclass: JSON; `bool`: `--x/--no-x`; `Literal`: choices; collections: `nargs="+"`;
`| None`: an optional type and `None` among the choices)."""

from __future__ import annotations

import ast
import inspect
import itertools
from dataclasses import dataclass
from typing import Any, Optional

from kb.config.modules import Module
from kb.config.refs import ClassRef, Evaluator, Frame, FunctionRef
from kb.config.values import Builtin, DictInstance, FieldKwargs, LiteralType, SetValue, Unknown, copy_value, plain
from kb.configmodel import JSON

_DATACLASS_DECORATORS = {"dataclass", "config", "dataclasses.dataclass", "pydantic.dataclasses.dataclass"}
_JSON_TIP = "Should either be a valid JSON string or JSON keys passed individually."
_HUMAN_READABLE = {"max_num_batched_tokens", "max_num_scheduled_tokens", "kv_cache_memory_bytes",
                   "safetensors_prefetch_block_size", "max_num_queued_tokens"}
MAX_ALIAS_DEPTH = 15


@dataclass(frozen=True)
class FieldSpec:
    """What `field(...)`/`Field(...)` says of a field's default."""

    default: Any
    factory: bool
    has_default: bool
    repr: bool = True


CONSTRAINTS = ("ge", "gt", "le", "lt", "min_length", "max_length", "multiple_of")


@dataclass(frozen=True)
class ConfigField:
    name: str
    annotation: Optional[ast.expr]
    module: Module
    default: Any
    has_default: bool
    repr: bool
    doc: str
    owner: str
    line: int
    constraints: tuple[tuple[str, Any], ...] = ()  # pydantic's `Field(ge=1)`, also inside `Annotated[...]`


@dataclass(frozen=True)
class Hint:
    """One member of a field's type hint, flattened out of unions and `Annotated`."""

    kind: str  # bool int float str none dict list tuple set literal dataclass other
    options: tuple[Any, ...] = ()
    cls: Optional[ClassRef] = None
    elem: Optional[tuple[Hint, ...]] = None  # a collection's element type
    nargs: Optional[Any] = None


# --- fields ---------------------------------------------------------------------------------------
def callee_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def field_spec(reader: Evaluator, value: ast.expr, frame: Frame) -> Optional[FieldSpec]:
    """The spec of `x: T = field(...)` (or pydantic's `Field(...)`, or vLLM's `get_field(C, "x")`),
    None for a plain default."""
    if isinstance(value, ast.Call) and callee_name(value.func) == "cast" and len(value.args) == 2:
        value = value.args[1]  # `cast(dict[str, int], get_field(ModelConfig, "limit_mm_per_prompt"))`
    if not isinstance(value, ast.Call) or callee_name(value.func) not in ("field", "Field", "get_field"):
        return None
    func = reader.eval(value.func, frame)
    kwargs = {k.arg: k.value for k in value.keywords if k.arg is not None}
    if isinstance(func, FunctionRef) and func.name == "get_field" and len(value.args) == 2:
        cls = reader.eval(value.args[0], frame)
        name = reader.eval(value.args[1], frame)
        if isinstance(cls, ClassRef) and isinstance(name, str):
            for f in dataclass_fields(reader, cls):
                if f.name == name:
                    return FieldSpec(f.default, False, f.has_default, f.repr)
        return FieldSpec(Unknown(ast.unparse(value)), False, False)
    if not (isinstance(func, Builtin) and func.name.split(".")[-1] in ("field", "Field")):
        return None
    shown = True
    if "repr" in kwargs:
        shown = reader.eval(kwargs["repr"], frame) is not False
    if "default" in kwargs:
        return FieldSpec(reader.eval(kwargs["default"], frame), False, True, shown)
    if value.args and not (isinstance(value.args[0], ast.Constant) and value.args[0].value is Ellipsis):
        return FieldSpec(reader.eval(value.args[0], frame), False, True, shown)
    if "default_factory" in kwargs:
        return FieldSpec(factory_value(reader, reader.eval(kwargs["default_factory"], frame)), True, True, shown)
    return FieldSpec(Unknown("<no default>"), False, False, shown)


def factory_value(reader: Evaluator, factory: Any) -> Any:
    if isinstance(factory, Builtin):
        empty = {"list": [], "dict": {}, "set": SetValue(()), "tuple": ()}
        return copy_value(empty.get(factory.name.split(".")[-1], Unknown(f"{factory.name}()")))
    if isinstance(factory, ClassRef):
        if reader.base_names(factory) & {"dict", "Dict"} and not is_dataclass(reader, factory):
            return DictInstance(factory.name)
        return reader.instance(factory)
    if isinstance(factory, FunctionRef):
        return reader.run_function(factory, [], {})
    return Unknown("<default_factory>")


def is_dataclass(reader: Evaluator, cls: ClassRef) -> bool:
    for d in cls.node.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if callee_name(target) in ("dataclass", "config") or ast.unparse(target) in _DATACLASS_DECORATORS:
            return True
    return False


def _is_classvar(annotation: ast.expr) -> bool:
    target = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    return callee_name(target) in ("ClassVar", "InitVar")


def dataclass_fields(reader: Evaluator, cls: ClassRef) -> list[ConfigField]:
    """`dataclasses.fields(cls)` from source: base classes' fields first, an overridden field
    keeping its place; each with its attribute docstring (vLLM's `get_attr_docs`)."""
    fields: dict[str, ConfigField] = {}
    docs: dict[str, str] = {}
    for owner in reversed(reader.mro(cls)):
        body = owner.node.body
        for a, b in itertools.pairwise(body):
            if isinstance(a, (ast.Assign, ast.AnnAssign)) and isinstance(b, ast.Expr) and \
                    isinstance(b.value, ast.Constant) and isinstance(b.value.value, str):
                for t in (a.targets if isinstance(a, ast.Assign) else [a.target]):
                    if isinstance(t, ast.Name):
                        docs[t.id] = inspect.cleandoc(b.value.value)
        if not is_dataclass(reader, owner):
            continue
        for stmt in body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)) or \
                    _is_classvar(stmt.annotation):
                continue
            name = stmt.target.id
            frame = Frame(owner.module)
            limits = annotated_constraints(reader, stmt.annotation, frame)
            if stmt.value is None:
                default, has, shown = Unknown("<no default>"), False, True
            else:
                spec = field_spec(reader, stmt.value, frame)
                if spec is not None:
                    default, has, shown = spec.default, spec.has_default, spec.repr
                    if isinstance(stmt.value, ast.Call):
                        limits = field_constraints(reader, stmt.value, frame) + limits
                else:
                    default, has, shown = reader.eval(stmt.value, frame), True, True
            fields[name] = ConfigField(name, stmt.annotation, owner.module, default, has, shown, "", owner.name,
                                       stmt.lineno, tuple(sorted(dict(limits).items())))
    return [ConfigField(f.name, f.annotation, f.module, f.default, f.has_default, f.repr, docs.get(f.name, ""),
                        f.owner, f.line, f.constraints) for f in fields.values()]


def field_constraints(reader: Evaluator, call: ast.Call, frame: Frame) -> list[tuple[str, JSON]]:
    out = []
    for k in call.keywords:
        if k.arg in CONSTRAINTS:
            value = reader.eval(k.value, frame)
            out.append((k.arg, plain(value)[0] if not isinstance(value, Unknown) else value.text))
    return out


def annotated_constraints(reader: Evaluator, node: ast.expr, frame: Frame) -> list[tuple[str, JSON]]:
    """`Annotated[int, Field(ge=-1)]` anywhere in the hint (also inside `| None`)."""
    out: list[tuple[str, JSON]] = []
    for sub in itertools.islice(ast.walk(node), 500):
        if isinstance(sub, ast.Subscript) and callee_name(sub.value) == "Annotated" and isinstance(sub.slice, ast.Tuple):
            for extra in sub.slice.elts[1:]:
                if isinstance(extra, ast.Call) and callee_name(extra.func) == "Field":
                    out += field_constraints(reader, extra, frame)
    return out


# --- type hints -----------------------------------------------------------------------------------
_BUILTIN_KINDS = {"bool": "bool", "int": "int", "float": "float", "str": "str", "dict": "dict", "Dict": "dict",
                  "list": "list", "List": "list", "tuple": "tuple", "Tuple": "tuple", "set": "set", "Set": "set",
                  "None": "none", "NoneType": "none"}


def hints(reader: Evaluator, node: Optional[ast.expr], module: Module, depth: int = 0) -> list[Hint]:
    """vLLM's `get_type_hints(field.type)`: the members of unions and `Annotated`, aliases followed."""
    if node is None or depth > MAX_ALIAS_DEPTH:
        return [Hint("other")]
    if isinstance(node, ast.Constant):
        if node.value is None:
            return [Hint("none")]
        if isinstance(node.value, str) and len(node.value) <= 2_000:  # a forward reference
            try:
                parsed = ast.parse(node.value, mode="eval").body
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                return [Hint("other")]
            return hints(reader, parsed, module, depth + 1)
        return [Hint("other")]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return hints(reader, node.left, module, depth + 1) + hints(reader, node.right, module, depth + 1)
    if isinstance(node, ast.Subscript):
        base = callee_name(node.value)
        items = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        if base == "Optional":
            return [*hints(reader, items[0], module, depth + 1), Hint("none")]
        if base == "Union":
            return [h for item in items for h in hints(reader, item, module, depth + 1)]
        if base == "Annotated":
            return hints(reader, items[0], module, depth + 1)
        if base == "Literal":
            value = reader.eval(node, Frame(module))
            return [Hint("literal", value.options)] if isinstance(value, LiteralType) else [Hint("other")]
        kind = _BUILTIN_KINDS.get(base)
        if kind in ("list", "tuple", "set"):
            elems = [i for i in items if not (isinstance(i, ast.Constant) and i.value is Ellipsis)]
            elem = hints(reader, elems[0], module, depth + 1) if elems else [Hint("other")]
            nargs: Any = "+" if kind != "tuple" or len(elems) != len(items) else len(items)
            return [Hint(kind, elem=tuple(elem), nargs=nargs)]
        if kind == "dict":
            return [Hint("dict")]
        return [Hint("other")]
    if isinstance(node, (ast.Name, ast.Attribute)):
        name = callee_name(node)
        if name in _BUILTIN_KINDS and (isinstance(node, ast.Name) or name in ("None", "NoneType")):
            found_local = isinstance(node, ast.Name) and name in module.bindings
            if not found_local:
                return [Hint(_BUILTIN_KINDS[name])]
        if isinstance(node, ast.Name):
            found = reader.modules.lookup(module, node.id)
            if found is None:
                return [Hint("other")]
            binding = found.binding
            if isinstance(binding, ast.ClassDef):
                return [_class_hint(reader, ClassRef(found.module, binding))]
            if isinstance(binding, ast.expr):
                return hints(reader, binding, found.module, depth + 1)
            return [Hint("other")]
        value = reader.eval(node, Frame(module))
        if isinstance(value, ClassRef):
            return [_class_hint(reader, value)]
        return [Hint("other")]
    return [Hint("other")]


def _class_hint(reader: Evaluator, cls: ClassRef) -> Hint:
    if is_dataclass(reader, cls):
        return Hint("dataclass", cls=cls)
    bases = reader.base_names(cls)
    if "TypedDict" in bases:
        return Hint("other")
    if bases & {"dict", "Dict"}:
        return Hint("dict")
    return Hint("other")


def _has(hs: list[Hint], kind: str) -> bool:
    return any(h.kind == kind for h in hs)


def field_kwargs(reader: Evaluator, cls: ClassRef, f: ConfigField) -> FieldKwargs:
    """One field's entry of vLLM's `_compute_kwargs(cls)`."""
    hs = hints(reader, f.annotation, f.module)
    help_text = f.doc.strip().replace("%", "%%")
    out = FieldKwargs(cls.name, f.name, {"default": f.default, "help": help_text})
    out.constraints = f.constraints
    dataclass_hint = next((h for h in hs if h.kind == "dataclass"), None)
    kinds = {h.kind for h in hs}
    if dataclass_hint is not None and dataclass_hint.cls is not None:
        out.parses_into = dataclass_hint.cls.name
    if dataclass_hint is not None:
        out["type"] = Builtin("parse_dataclass")
        out["help"] += f"\n\n{_JSON_TIP}"
    elif kinds == {"bool", "str", "none"}:
        out.update(type=Builtin("str"), nargs="?", const=True)
    elif "bool" in kinds:
        out["action"] = Builtin("argparse.BooleanOptionalAction")
    elif "literal" in kinds:
        out.update(_literal_kwargs(hs))
    elif kinds & {"tuple", "list", "set"}:
        kind = next(k for k in ("tuple", "list", "set") if k in kinds)
        coll = next(h for h in hs if h.kind == kind)
        elem = list(coll.elem or (Hint("other"),))
        if len(elem) > 1:  # list[int | str]: the element is read as str
            out.update(type=Builtin("str"), nargs=coll.nargs)
        elif elem[0].kind == "literal":
            out.update(_literal_kwargs(elem))
            out["nargs"] = coll.nargs
        else:
            out.update(type=Builtin(elem[0].kind if elem[0].kind in ("int", "float", "str") else "str"),
                       nargs=coll.nargs)
    elif "int" in kinds:
        if f.name == "max_model_len":
            out["type"] = Builtin("human_readable_int_or_auto")
        elif f.name in _HUMAN_READABLE:
            out["type"] = Builtin("human_readable_int")
        else:
            out["type"] = Builtin("int")
    elif "float" in kinds:
        out["type"] = Builtin("float")
    elif "dict" in kinds and ("str" in kinds or "other" in kinds or "dataclass" in kinds):
        out["type"] = Builtin("union_dict_and_str")
    elif "dict" in kinds:
        out["type"] = Builtin("_parse_type")
        out["help"] += f"\n\n{_JSON_TIP}"
    else:
        out["type"] = Builtin("str")
    if "none" in kinds and "bool" not in kinds:
        wrapped = out.get("type")
        out["type"] = Builtin("_optional_type", wrapped.name.split(".")[-1] if isinstance(wrapped, Builtin) else None)
        if out.get("choices"):
            out["choices"] = [*out["choices"], None]
    return out


def _literal_kwargs(hs: list[Hint]) -> dict[str, Any]:
    options: list[Any] = [o for h in hs if h.kind == "literal" for o in h.options]
    if not options:
        return {"type": Builtin("str")}
    try:
        ordered = sorted(options)
    except TypeError:
        ordered = options
    kind = type(options[0]).__name__
    key = "metavar" if any(h.kind == "str" for h in hs) else "choices"
    return {"type": Builtin(kind), key: ordered}


def compute_kwargs(reader: Evaluator, cls: ClassRef) -> dict[str, FieldKwargs]:
    key = (cls.module.name, cls.name)
    if key not in reader.kwargs_cache:
        reader.kwargs_cache[key] = {f.name: field_kwargs(reader, cls, f) for f in dataclass_fields(reader, cls)}
    return {k: copy_value(v) for k, v in reader.kwargs_cache[key].items()}


def _native_get_kwargs(reader: Evaluator, args: list[Any], kwargs: dict[str, Any], node: ast.expr) -> Any:
    if len(args) == 1 and isinstance(args[0], ClassRef):
        return compute_kwargs(reader, args[0])
    return Unknown("get_kwargs(...)")


NATIVE = {"get_kwargs": _native_get_kwargs, "_compute_kwargs": _native_get_kwargs}
