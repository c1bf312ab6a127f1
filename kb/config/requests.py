"""The fields a request sets: `SamplingParams` (vllm/sampling_params.py, a msgspec Struct) and
the OpenAI protocol's request models (pydantic), read from their class bodies: annotation,
default (plain, `Field(...)`/`field(...)`), pydantic constraints, attribute docstring or
`Field(description=...)`. Base classes in the tree come first, an overridden field keeping its
place, as pydantic and msgspec order them. Private names (`_x`) are not inputs and are left out."""

from __future__ import annotations

import ast
import inspect
import itertools
from collections.abc import Sequence
from typing import Any, Optional

from kb.config.fields import annotated_constraints, callee_name, field_constraints, field_spec
from kb.config.interp import Reader
from kb.config.refs import ClassRef, Frame
from kb.config.values import Unknown, plain, source_text
from kb.configmodel import JSON, RequestField

SAMPLING_MODULE, SAMPLING_CLASS = "vllm.sampling_params", "SamplingParams"  # the request model kb checks
REQUEST_MODELS = ("ChatCompletionRequest", "CompletionRequest")
PROTOCOL_PREFIX = "vllm/entrypoints/"
MAX_PROTOCOL_FILES = 60
MAX_FIELDS = 2_000


def read_request_fields(reader: Reader, paths: Sequence[str]) -> list[RequestField]:
    out: list[RequestField] = []
    sampling = _class(reader, SAMPLING_MODULE, SAMPLING_CLASS)
    if sampling is not None:
        out += class_fields(reader, sampling, SAMPLING_CLASS)
    for model in REQUEST_MODELS:
        cls = _find(reader, paths, model)
        if cls is not None:
            out += class_fields(reader, cls, model)
    return out


def _class(reader: Reader, module_name: str, name: str) -> Optional[ClassRef]:
    module = reader.modules.get(module_name)
    found = reader.modules.lookup(module, name) if module is not None else None
    value = reader.found_value(found) if found is not None else None
    return value if isinstance(value, ClassRef) else None


def _find(reader: Reader, paths: Sequence[str], name: str) -> Optional[ClassRef]:
    """The module under vllm/entrypoints/ whose name ends in `protocol` and that defines `class name(`."""
    from kb.config.modules import module_name

    needle = f"class {name}(".encode()
    candidates = sorted(p for p in paths if p.startswith(PROTOCOL_PREFIX) and p.endswith("protocol.py"))
    for path in candidates[:MAX_PROTOCOL_FILES]:
        try:
            data = reader.modules.read(path)
        except (OSError, KeyError, ValueError):
            continue
        if needle in data:
            module = reader.modules.get(module_name(path))
            binding = module.bindings.get(name) if module is not None else None
            if module is not None and isinstance(binding, ast.ClassDef):
                return ClassRef(module, binding)
    return None


def class_fields(reader: Reader, cls: ClassRef, model: str) -> list[RequestField]:
    fields: dict[str, RequestField] = {}
    for owner in reversed(reader.mro(cls)):
        docs = _attribute_docs(owner.node.body)
        for stmt in owner.node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            name = stmt.target.id
            if name.startswith("_") or _is_classvar(stmt.annotation):
                continue
            if len(fields) >= MAX_FIELDS and name not in fields:
                reader.warn(owner.module, stmt, f"{model}: more than {MAX_FIELDS} fields, the rest not read")
                return list(fields.values())
            fields[name] = _field(reader, owner, stmt, model, docs.get(name, ""))
    return list(fields.values())


def _field(reader: Reader, owner: ClassRef, stmt: ast.AnnAssign, model: str, doc: str) -> RequestField:
    frame = Frame(owner.module)
    name = stmt.target.id if isinstance(stmt.target, ast.Name) else ""
    constraints: list[tuple[str, JSON]] = []
    default: Any
    if stmt.value is None:
        default, has = None, False
    else:
        spec = field_spec(reader, stmt.value, frame)
        if spec is None:
            default, has = reader.eval(stmt.value, frame), True
        else:
            default, has = spec.default, spec.has_default
            assert isinstance(stmt.value, ast.Call)
            constraints += field_constraints(reader, stmt.value, frame)
            description = next((k.value for k in stmt.value.keywords if k.arg == "description"), None)
            if not doc and description is not None:
                text = reader.eval(description, frame)
                doc = inspect.cleandoc(text) if isinstance(text, str) else ""
    constraints += annotated_constraints(reader, stmt.annotation, frame)
    known = not has or not isinstance(default, Unknown)
    shown, exact = plain(default) if has else (None, True)
    if has and not known:
        shown = default.text
    return RequestField(model, name, source_text(stmt.annotation), shown, exact and known, known, not has,
                        tuple(sorted(dict(constraints).items())), doc, owner.module.path, stmt.lineno)


def _attribute_docs(body: list[ast.stmt]) -> dict[str, str]:
    docs: dict[str, str] = {}
    for a, b in itertools.pairwise(body):
        if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name) and isinstance(b, ast.Expr) and \
                isinstance(b.value, ast.Constant) and isinstance(b.value.value, str):
            docs[a.target.id] = inspect.cleandoc(b.value.value)
    return docs


def _is_classvar(annotation: ast.expr) -> bool:
    target = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    return callee_name(target) in ("ClassVar", "InitVar")

