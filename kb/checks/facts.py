"""A launch's facts (its flags, config.json, environment, platform, request) and a derived check
(kb/checks/compiled.py) run on them: the value of each named input, the verdict, the message."""

from __future__ import annotations

import enum
import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from kb.checks.compiled import PLATFORMS, Derived, Passed, Ref
from kb.checks.computed import Computed, Hardware, compute
from kb.checks.evaluate import evaluate, holds
from kb.checks.jsonfields import MISSING as JSON_MISSING
from kb.checks.jsonfields import converter
from kb.config.order import REQUEST_CLASS
from kb.configmodel import ConfigModel
from kb.errors import ExprError, MissingInput

# config.json keys vLLM falls back from when they are absent (vllm/config/model_arch.py)
KEY_FALLBACKS = {"num_key_value_heads": "num_attention_heads"}


@dataclass(frozen=True)
class Facts:
    """What one launch gives the derived checks: the flags vLLM's parser read (dest -> value),
    the model's config.json, the environment, the platform."""

    flags: Mapping[str, Any]
    defaults: Mapping[str, Any]  # dest -> default, for the flags whose default is known exactly
    config: Mapping[str, Any]
    env: Mapping[str, Any]
    platform: Mapping[str, Any]
    key_defaults: Mapping[str, Any] = field(default_factory=dict)  # "dest.key" -> the class's default for a key left out
    # "dest.key" -> the value pydantic holds for what the JSON gives (kb/checks/jsonfields.py converter)
    key_types: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)
    computed: Computed = field(default_factory=Computed)  # what vLLM computes before its guards
    # the request's sampling parameters (field -> value); None: no request, whose checks then do not run
    request: Optional[Mapping[str, Any]] = None
    request_defaults: Mapping[str, Any] = field(default_factory=dict)  # SamplingParams' defaults known exactly


_MISSING = object()


@dataclass(frozen=True)
class Instance:
    """A flag's default that is an instance of a config class: compared, it is only itself."""

    config_class: str


def value_of(ref: Ref, facts: Facts) -> Any:
    """The value, or _MISSING when the launch does not say it."""
    if ref.kind == "flag":
        if ref.key in facts.flags:
            return facts.flags[ref.key]
        return facts.defaults.get(ref.key, _MISSING)
    if ref.kind == "flag-given":
        return facts.flags.get(ref.key, _MISSING)
    if ref.kind in ("flag-key", "flag-key-given"):
        dest, _, key = ref.key.partition(".")
        given = facts.flags.get(dest)
        if not isinstance(given, dict):
            return _MISSING
        if key not in given:
            return facts.key_defaults.get(ref.key, _MISSING) if ref.kind == "flag-key" else _MISSING
        convert = facts.key_types.get(ref.key)
        if convert is None:
            return given[key]
        value = convert(given[key])
        return _MISSING if value is JSON_MISSING else value
    if ref.kind == "config-json":
        for where in (facts.config.get("text_config"), facts.config):
            if isinstance(where, dict) and where.get(ref.key) is not None:
                return where[ref.key]
        fallback = KEY_FALLBACKS.get(ref.key)
        return value_of(Ref(ref.name, ref.kind, fallback, ref.shown), facts) if fallback else _MISSING
    if ref.kind == "env":
        return facts.env.get(ref.key, _MISSING)
    if ref.kind == "given":
        return ref.key in facts.flags
    if ref.kind == "platform":
        return facts.platform.get(ref.key, _MISSING)
    if ref.kind == "computed":
        return facts.computed.values.get(ref.key, _MISSING)
    if ref.kind == "request":
        if facts.request is None:
            return _MISSING
        return facts.request[ref.key] if ref.key in facts.request else facts.request_defaults.get(ref.key, _MISSING)
    if ref.kind == "value":
        return constant_value(ref.key)
    return _MISSING


@functools.lru_cache(maxsize=64)
def _flag_class(name: str, members: tuple[tuple[str, int], ...]) -> Any:
    return enum.IntFlag(name, dict(members))


@functools.lru_cache(maxsize=1024)
def _decoded(key: str) -> Any:
    return json.loads(key)


def constant_value(key: str) -> Any:
    """A value of vLLM's source (kb.config.names), from its tagged JSON: ["tuple", [["const", "a"]]]."""
    return _untagged(_decoded(key))


def constants_of(check: Derived) -> dict[str, Any]:
    """Ref name -> the value of each of vLLM's own constants the check reads (kind `value`); one
    that cannot be decoded is left out (its callers name it as vLLM does)."""
    out: dict[str, Any] = {}
    for r in check.refs:
        if r.kind == "value":
            try:
                out[r.name] = constant_value(r.key)
            except (ValueError, TypeError, KeyError, IndexError):
                continue
    return out


def _untagged(tagged: Any) -> Any:
    kind, value = tagged
    if kind == "const":
        return value
    if kind == "member":  # a member of a flag enum: `in` and `|` as Python computes them
        cls, members, member = value
        return _flag_class(cls, tuple((m, v) for m, v in members))[member]
    if kind == "dict":
        return {_untagged(k): _untagged(v) for k, v in value}
    items = [_untagged(v) for v in value]
    return tuple(items) if kind == "tuple" else frozenset(items) if kind == "set" else items


@dataclass(frozen=True)
class Verdict:
    check: Derived
    raises: Optional[bool]  # None: unknown
    missing: tuple[str, ...] = ()  # what it needs, as users name it
    message: str = ""  # the template filled where the values are known
    error: str = ""  # the evaluator's message when its condition fails on these values


def run(check: Derived, facts: Facts, template: str) -> Verdict:
    if check.parsed_by and check.parsed_by not in facts.flags:
        return Verdict(check, False)  # its config is built only from that flag's JSON: not given, never reached
    values: dict[str, Any] = {}
    for r in check.refs:
        v = value_of(r, facts)
        if v is not _MISSING:
            values[r.name] = v
    try:
        raises = holds(check.expr, values)
    except MissingInput as e:
        needed = tuple(facts.computed.missing.get(r.key, r.shown) if r.kind == "computed" else r.shown
                       for r in check.refs if r.name == e.name)
        return Verdict(check, None, needed or (e.name,))
    except ExprError as e:
        return Verdict(check, None, (), "", e.message)
    return Verdict(check, raises, (), fill(check, template, values) if raises else "")


def passed_value(p: Passed, facts: Facts) -> Any:
    """The value create_engine_config passes, or _MISSING when the launch does not say it (or the
    config is not built)."""
    values = {r.name: v for r in p.refs if (v := value_of(r, facts)) is not _MISSING}
    try:
        if p.when and not evaluate(p.when, values, derived=True):
            return _MISSING
        return evaluate(p.expr, values, derived=True)
    except ExprError:
        return _MISSING


def fill(check: Derived, template: str, values: Mapping[str, Any]) -> str:
    text = template
    for placeholder, expr in check.message:
        try:
            shown = str(evaluate(expr, values, derived=True))
        except (ExprError, ValueError):
            continue
        text = text.replace("{" + placeholder + "}", shown, 1)
    return text


def facts_of(model: ConfigModel, parsed: Mapping[str, Any], config: Mapping[str, Any],
             env: Optional[Mapping[str, Any]] = None, platform: str = "cuda",
             hardware: Optional[Hardware] = None, request: Optional[Mapping[str, Any]] = None) -> Facts:
    model_facts = _model_facts(model)
    defaults = dict(model_facts.defaults)
    env_values = dict(model_facts.env)
    env_values.update(env or {})
    computed = compute(model, parsed, defaults, config, hardware or Hardware())
    return Facts(parsed, defaults, config, env_values, PLATFORMS.get(platform, {}), model_facts.keys,
                 model_facts.types, computed, request, model_facts.request_defaults)


@dataclass(frozen=True)
class _ModelFacts:
    """What every launch's facts take from the flag model alone (the same for each launch)."""

    defaults: Mapping[str, Any]
    env: Mapping[str, Any]
    keys: Mapping[str, Any]
    types: Mapping[str, Callable[[Any], Any]]
    request_defaults: Mapping[str, Any]


# the last flag model's (the model is kept, so that its id stays its own): a fix search runs
# thousands of launches against one model
_LAST_MODEL: list[tuple[ConfigModel, _ModelFacts]] = []


def _model_facts(model: ConfigModel) -> _ModelFacts:
    for known, found in _LAST_MODEL:
        if known is model:
            return found
    defaults: dict[str, Any] = {f.dest: f.default for f in model.flags if f.default_known and f.default_exact}
    for f in model.flags:  # a config instance by default (`FaultToleranceConfig(...)`): not None, not a dict
        if f.parses_into and f.dest not in defaults and isinstance(f.default, str) and \
                f.default.startswith(f.parses_into + "("):
            defaults[f.dest] = Instance(f.parses_into)
    env_values = {e.name: e.default for e in model.env if e.default_known and e.default_exact}
    by_class: dict[str, list[str]] = {}
    names = {c.replace("_", "").lower(): c for c, _, _ in model.class_defaults}
    for f in model.flags:
        cls = f.parses_into or (names.get(f.dest.replace("_", "").lower()) if f.dest.endswith("_config") else None)
        if cls:
            by_class.setdefault(cls, []).append(f.dest)
    parsed_into = {f.parses_into for f in model.flags}  # once, not once per class default
    keys = {f"{dest}.{name}": value for cls, name, value in model.class_defaults for dest in by_class.get(cls, [])
            if cls in parsed_into}
    types = {f"{dest}.{j.name}": converter(j) for j in model.json_fields for dest in by_class.get(j.config_class, [])}
    request_defaults = {f.name: f.default for f in model.request_fields
                        if f.model == REQUEST_CLASS and f.default_known and f.default_exact and not f.required}
    found = _ModelFacts(defaults, env_values, keys, types, request_defaults)
    _LAST_MODEL[:] = [(model, found)]
    return found


def reads_request(check: Derived) -> bool:
    """A check of the request's sampling parameters: it runs only on a request."""
    return any(r.kind == "request" for r in check.refs)
