"""vLLM's order: which predicted error a launch meets first.

`vllm serve` reads the command line (kb/checks/cli_parse.py), then `EngineArgs` is built
(its `__post_init__`), then `create_engine_config` builds the configs one after another (the
flag model's `build_order`, read from its source). Building a config runs pydantic's field
constraints (all of one class reported together) and field validators, then `__post_init__`,
then the model validators (vLLM's are `mode="after"`: real vLLM 0.33.0 raises ParallelConfig's
world-size check of `__post_init__` before its TP/DCP model validator). A
config's other methods (`ModelConfig.verify_with_parallel_config`) run once every config is
built, from `VllmConfig`; so do `VllmConfig`'s own checks. Raises elsewhere come last, in file
and line order. Within one place, vLLM's line order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from kb.configmodel import ConfigModel
from kb.model import Record

ENGINE_FILE = "vllm/engine/arg_utils.py"
_AT_BUILD = frozenset({"__post_init__", "__init__"})
_VALIDATORS = frozenset({"field_validator", "model_validator", "validator", "root_validator", "post_init", "init"})
LAST = math.inf
REQUEST_FILE = "vllm/sampling_params.py"  # the request model (kb/checks/derive.py REQUEST_CLASS)
REQUEST_PHASE = 9  # after every launch-time phase


def position(r: Record, order: Mapping[str, int]) -> tuple[float, int, str, int]:
    """Where in vLLM's start-up the record's first site raises: (line of create_engine_config it
    happens at, its phase there, file, line). A function that is not a method of a config runs
    where its callers in the same file run (`_get_and_verify_max_len`, called by
    `ModelConfig.get_and_verify_max_len`, called by `ModelConfig.__post_init__`): the earliest."""
    site = r.sites[0]
    if site.file == REQUEST_FILE:
        return (LAST, REQUEST_PHASE, r.file, r.line)  # a request's checks: once vLLM has started, in line order
    own = _place(site.fact.qualname, site.fact.validation, r.file, site.line, order)
    later = "VllmConfig" in order and own[0] == order["VllmConfig"] + 0.5  # a method, run after the builds
    if not (own[0] == LAST or later) or not site.fact.callers:
        return (*own, r.file, r.line)
    # where its callers in the same file run it, and at which of their lines
    through = [(*_place(c.qualname, None, r.file, c.line, order), r.file, c.line) for c in site.fact.callers]
    through += [(*_place(cc.qualname, None, r.file, cc.line, order), r.file, cc.line)
                for c in site.fact.callers for cc in c.callers]
    return min(through)  # it runs when (and where) its first caller calls it


def _place(qualname: str, validation: Optional[str], file: str, line: int,
           order: Mapping[str, int]) -> tuple[float, int]:
    parts = qualname.split(".")
    cls = parts[0] if len(parts) > 1 and parts[0][:1].isupper() else ""
    fn = parts[-1]
    built_at: float = LAST
    if cls == "EngineArgs":
        if fn == "__post_init__":
            built_at = 0
        elif fn == "create_engine_config" and file == ENGINE_FILE:
            built_at = line
        else:
            made = next((c for c in order if fn == f"create_{_snake(c)}"), None)
            built_at = order[made] if made is not None else LAST
    elif cls in order and (fn in _AT_BUILD or validation in _VALIDATORS):
        # pydantic builds a config: field constraints (0) and field validators, then __post_init__, then
        # the model validators (mode="after", as vLLM's checks are)
        return (order[cls], {"field_validator": 1, "validator": 1, "model_validator": 3,
                             "root_validator": 3}.get(validation or "", 2))
    elif cls in order and "VllmConfig" in order:
        built_at = order["VllmConfig"] + 0.5  # once every config is built
    return (built_at, 1)


def _snake(name: str) -> str:
    """ModelConfig -> model_config."""
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(name))


# --- pydantic's field constraints ---------------------------------------------------------------------
_CHECKS: tuple[tuple[str, str, str, Callable[[float, float], bool]], ...] = (
    # pydantic-core's order for numbers: multiple_of, le, lt, ge, gt
    ("multiple_of", "multiple_of", "Input should be a multiple of {}", lambda v, c: v % c == 0),
    ("le", "less_than_equal", "Input should be less than or equal to {}", lambda v, c: v <= c),
    ("lt", "less_than", "Input should be less than {}", lambda v, c: v < c),
    ("ge", "greater_than_equal", "Input should be greater than or equal to {}", lambda v, c: v >= c),
    ("gt", "greater_than", "Input should be greater than {}", lambda v, c: v > c),
)


@dataclass(frozen=True)
class FieldError:
    field: str
    flag: str
    kind: str  # pydantic's error type
    msg: str
    value: Any


@dataclass(frozen=True)
class ValidationFailure:
    """pydantic's ValidationError when a config is built from the given flags."""

    config_class: str
    errors: tuple[FieldError, ...]
    built_at: int  # the line of create_engine_config that builds it
    made_at: int = 0  # the line of the `XConfig(...)` call pydantic raises at (in a create_x_config method)

    @property
    def printed(self) -> str:
        return pydantic_report(self.config_class, [(e.field, e.msg, e.kind, e.value) for e in self.errors])


def pydantic_report(config_class: str, errors: Sequence[tuple[str, str, str, Any]]) -> str:
    """pydantic's ValidationError as it prints: `N validation error(s) for <class>`, then for each
    (location, message, type, value) its location (none for a check of the whole config) and
    `  <message> [type=..., input_value=..., input_type=...]`; its link to its docs left out."""
    n = len(errors)
    lines = [f"{n} validation error{'s' if n > 1 else ''} for {config_class}"]
    for loc, msg, kind, value in errors:
        lines += [loc] if loc else []
        lines.append(f"  {msg} [type={kind}, input_value={pydantic_repr(value)}, input_type={type(value).__name__}]")
    return "\n".join(lines)


def pydantic_repr(value: Any) -> str:
    """A value as pydantic's error shows it: its repr, the middle cut when longer than 50 characters."""
    text = repr(value)
    return text if len(text) <= 50 else f"{text[:25]}...{text[-24:]}"


def _shown(c: Any) -> str:
    return str(int(c)) if isinstance(c, float) and c.is_integer() else str(c)


def validation_failures(model: ConfigModel, values: Mapping[str, Any], given: Sequence[str],
                        passed: Optional[Mapping[str, Sequence[FieldError]]] = None) -> list[ValidationFailure]:
    """The configs whose pydantic constraints the given flags break, in the order they are built;
    `passed`: more errors per config, of the values create_engine_config passes (kb/checks/derive.py).
    Each config's errors in its field order, as pydantic reports them."""
    order = dict(model.build_order)
    by_class: dict[str, list[FieldError]] = {c: list(errs) for c, errs in (passed or {}).items() if c in order}
    for f in sorted(model.flags, key=lambda f: (f.file, f.line)):
        if f.dest not in given or not f.constraints or f.config_class not in order or f.config_field is None:
            continue
        error = constraint_error(f.config_field, f.name, values.get(f.dest), f.constraints)
        errs = by_class.setdefault(f.config_class, [])
        if error is not None and all(e.field != error.field for e in errs):
            errs.append(error)
    fields = {(j.config_class, j.name): n for n, j in enumerate(model.json_fields)}
    made = {b.config_class: b.made_at for b in model.builds}
    return sorted((ValidationFailure(c, tuple(sorted(errs, key=lambda e: fields.get((c, e.field), len(fields)))),
                                     order[c], made.get(c, 0)) for c, errs in by_class.items() if errs),
                  key=lambda v: v.built_at)


def constraint_error(field: str, flag: str, value: Any, constraints: Sequence[tuple[str, Any]]) -> Optional[FieldError]:
    """pydantic's error for a number that breaks one of a field's constraints, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    limits = dict(constraints)
    for key, kind, msg, ok in _CHECKS:
        limit = limits.get(key)
        if isinstance(limit, (int, float)) and not isinstance(limit, bool) and not ok(value, limit):
            return FieldError(field, flag, kind, msg.format(_shown(limit)), value)
    return None

