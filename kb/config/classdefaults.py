"""The configs' own field defaults, as their classes declare them, and which fields a validator
checks before the config's own code changes them."""

from __future__ import annotations

import ast
from collections.abc import Sequence

from kb.config.interp import Reader
from kb.config.order import (
    CONFIG_PACKAGE,
)
from kb.config.refs import ClassRef
from kb.configmodel import JSON, JsonField


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
