"""What sets an error: every name its guard reads, resolved to what a user controls.

A raise site's guard terms name locals (`fact.locals`), fields of the config class the raise is
in (`self.tensor_parallel_size`), fields of other configs (`self.parallel_config.x`,
`parallel_config.x`), `hf_config` attributes, `envs.VLLM_*` and platform calls. Each reference is
resolved by the first rule of a chain that knows it (`Rule`: flags of the scanned `vllm serve`,
config.json keys, environment variables, hardware and run time, vLLM's own constants), else it is
`unresolved`. New rules (request fields, the declared environment variables) are added to the
chain without changing the rest. Pure functions of the scan; nothing of vLLM is imported or run.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Optional

from kb.config.references import (
    BUILTINS,
    MAX_NESTING,
    MAX_TERM,
    attribute_chain,
    named_attribute,
    parse_term,
    references,
)
from kb.config.rules import (
    REQUEST_FILES,
    Rule,
    Scope,
    default_rules,
    input_page,
)
from kb.configmodel import ConfigModel
from kb.model import RaiseSite
from kb.scan.limits import nesting_ok
from kb.setby import (
    CHECKPOINT,
    CONFIG_JSON,
    ENV,
    FLAG,
    HARDWARE,
    INTERNAL,
    INVARIANT,
    LAUNCH,
    MODEL,
    NOT_FOLLOWED,
    REQUEST,
    REQUEST_FIELD,
    RUNTIME,
    UNRESOLVED,
    Input,
    SetBy,
)

_WORDS = re.compile(r"\w+")
MAX_DEPTH = 6  # locals followed through locals
MAX_REFS = 64  # references read per site


class Resolver:
    """The rules in order; `inputs_of(site)` resolves every reference of its guard."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = tuple(rules)

    def resolve(self, parts: tuple[str, ...], text: str, scope: Scope, depth: int = 0) -> list[Input]:
        key = (parts, text, depth)
        if key not in scope.memo:
            scope.memo[key] = self._resolve(parts, text, scope, depth)
        return scope.memo[key]

    def _resolve(self, parts: tuple[str, ...], text: str, scope: Scope, depth: int) -> list[Input]:
        local = parts[0] in scope.locals and depth < MAX_DEPTH
        named = len(parts) > 1 and parts[0].endswith("_config")  # `parallel_config.x`: rules know it by name
        if local and not named:
            return self.follow_local(parts, scope, depth)
        traced = parts[0] in scope.params and parts[0] not in scope.locals and depth < MAX_DEPTH
        if traced and not parts[0].endswith("_config"):  # a `*_config` is named for its class: rules first
            return self.through_callers(parts, text, scope, depth)
        for rule in self.rules:
            found = rule(parts, text, scope)
            if found is not None:
                return [found]
        if local:
            return self.follow_local(parts, scope, depth)
        if traced:
            return self.through_callers(parts, text, scope, depth)
        return [Input(UNRESOLVED, text, text, NOT_FOLLOWED)]

    def follow_local(self, parts: tuple[str, ...], scope: Scope, depth: int) -> list[Input]:
        """A local, read as the value the function assigned it before the raise."""
        source = re.sub(r"^copy\.(?:deep)?copy\((.*)\)$", r"\1", scope.locals[parts[0]])
        if len(parts) > 1:
            source = f"({source})." + ".".join(parts[1:])
        if parts[0] in _WORDS.findall(source):  # `x = x or 1`: the x it reads is the earlier one
            scope = replace(scope, locals={k: v for k, v in scope.locals.items() if k != parts[0]}, memo={},
                            caller_scopes={})
        return self.resolve_text(source, scope, depth + 1)

    def through_callers(self, parts: tuple[str, ...], text: str, scope: Scope, depth: int) -> list[Input]:
        """A parameter, read as what each call of its function in the same file passes for it."""
        out: list[Input] = []
        for c in scope.callers:
            arg = next((a for a in c.args if a.param == parts[0]), None)
            where = f"{c.qualname} (line {c.line})"
            if arg is None:
                out.append(Input(UNRESOLVED, text, text, f"the parameter {parts[0]}, which the call in {where} "
                                 "fills from *args or **kwargs: not followed by kb"))
                continue
            source = arg.source if len(parts) == 1 else f"({arg.source})." + ".".join(parts[1:])
            how = f"passes {parts[0]}={arg.source}" if arg.passed else f"leaves {parts[0]} to its default {arg.source}"
            found = self.resolve_text(source, scope.of_caller(c), depth + 1)
            if not found:
                out.append(Input(INTERNAL, text, text, f"{where} {how}: a constant of vLLM's source"))
            out += [replace(i, via=f"{where} {how}; {i.via}") for i in found]
        return out

    def resolve_text(self, text: str, scope: Scope, depth: int = 0) -> list[Input]:
        node = parse_term(text)
        if node is None:
            return [Input(UNRESOLVED, text[:200], text[:200], "not parsed by kb")]
        out: list[Input] = []
        for parts, ref in references(node):
            found = self.resolve(parts, _text(parts, ref), scope, depth)
            if isinstance(ref, ast.Call) and parts[-1].endswith("()") and (ref.args or ref.keywords) and found and \
                    not found[0].resolved and parts[0] not in ("self", "cls"):
                continue  # a function of its arguments, which are read on their own
            out += found
            if len(out) >= MAX_REFS:
                break
        return out

    def rewrite(self, text: str, scope: Scope, depth: int = 0, memo: Optional[dict[str, Optional[str]]] = None) -> str:
        """The term with every flag, key and variable it reads written as users name them; a
        local whose value reads them is written out in its place (`memo`: labels of locals)."""
        if parse_term(text) is None:
            return text
        node = ast.parse(text.strip(), mode="eval").body  # a fresh tree: the parsed ones are shared
        swap = _Swap(self, scope, depth, {} if memo is None else memo)
        try:
            out = ast.unparse(swap.visit(node))
        except (RecursionError, ValueError):
            return text
        for key in sorted(swap.names, key=len, reverse=True):
            out = out.replace(key, swap.names[key])
        return out

    def label_of(self, parts: tuple[str, ...], node: ast.expr, scope: Scope, depth: int,
                 memo: dict[str, Optional[str]]) -> Optional[str]:
        if parts[0] in scope.locals and depth < MAX_DEPTH and not (len(parts) > 1 and parts[0].endswith("_config")):
            if len(parts) > 1:
                return None
            if parts[0] not in memo:
                memo[parts[0]] = None  # a local defined through itself stays named
                source = scope.locals[parts[0]]
                parsed = parse_term(source)
                inner = self.rewrite(source, scope, depth + 1, memo)
                if parsed is None or inner == ast.unparse(parsed) or len(inner) > 120:
                    memo[parts[0]] = None  # nothing of users' in it, or too long to inline: keep its name
                else:
                    memo[parts[0]] = inner if isinstance(parsed, (ast.Name, ast.Attribute, ast.Call)) else f"({inner})"
            return memo[parts[0]]
        if parts[0] in scope.params and parts[0] not in scope.locals and depth < MAX_DEPTH and \
                not parts[0].endswith("_config"):
            return self.caller_label(parts, scope, depth)
        found = self.resolve(parts, _text(parts, node), scope, depth)
        if len(found) == 1 and found[0].kind in (FLAG, CONFIG_JSON, ENV):
            return found[0].key
        return None

    def caller_label(self, parts: tuple[str, ...], scope: Scope, depth: int) -> Optional[str]:
        """A parameter written as what its callers pass, when they all pass the same users' names."""
        shown: set[str] = set()
        for c in scope.callers:
            arg = next((a for a in c.args if a.param == parts[0]), None)
            source = None if arg is None else arg.source if len(parts) == 1 else \
                f"({arg.source})." + ".".join(parts[1:])
            parsed = parse_term(source) if source is not None else None
            if source is None or parsed is None:
                return None
            inner = self.rewrite(source, scope.of_caller(c), depth + 1, {})
            if inner == ast.unparse(parsed) or len(inner) > 120:
                return None
            shown.add(inner if isinstance(parsed, (ast.Name, ast.Attribute, ast.Call)) else f"({inner})")
        return shown.pop() if len(shown) == 1 else None


class _Swap(ast.NodeTransformer):
    """Replaces each chain that names a flag, a key or a variable by a placeholder name."""

    def __init__(self, resolver: Resolver, scope: Scope, depth: int, memo: dict[str, Optional[str]]) -> None:
        self.resolver, self.scope, self.depth, self.memo = resolver, scope, depth, memo
        self.names: dict[str, str] = {}

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if isinstance(node, (ast.Attribute, ast.Name, ast.Call)):
            parts = named_attribute(node) or attribute_chain(node)
            if parts is not None and not (len(parts) == 1 and parts[0] in BUILTINS):
                label = self.resolver.label_of(parts, node, self.scope, self.depth, self.memo)
                if label is not None:
                    key = f"_kb_{len(self.names)}_"
                    self.names[key] = label
                    return ast.Name(key, ast.Load())
                if not isinstance(node, ast.Call):
                    return node  # a chain kb does not name: kept as vLLM wrote it
        return super().generic_visit(node)


def _text(parts: tuple[str, ...], node: ast.expr) -> str:
    return ast.unparse(node) if isinstance(node, ast.Call) else ".".join(parts)


def scope_of(site: RaiseSite) -> Scope:
    qual = site.fact.qualname.split(".")
    owner = qual[-2] if len(qual) > 1 and qual[-2][:1].isupper() else ""
    validated = {}
    if site.fact.validation == "field_validator":
        field_name = _validated_field(site, qual[-1])
        validated = {"value": field_name, "v": field_name, "values": field_name}
    elif site.fact.validation == "model_validator":
        validated = {"data": "", "values": ""}  # every field given to the class
    bound: dict[str, str] = {}
    for c in site.fact.contexts:
        if c.kind == "for":
            bound.update(_loop_names(c.source))
    for term in site.fact.guard_terms:
        bound.update(_walrus_names(term))
    return Scope(site.file, owner, qual[-1], bound | {d.name: d.source for d in site.fact.locals}, validated,
                 site.fact.callers)


@lru_cache(maxsize=16384)
def _loop_names(head: str) -> tuple[tuple[str, str], ...]:
    """`for family, buckets in value.items()` -> each name it binds, read as the collection it walks."""
    try:
        loop = ast.parse(head.rstrip(":") + ":\n    pass").body[0] if len(head) <= MAX_TERM else None
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    if not isinstance(loop, (ast.For, ast.AsyncFor)) or not nesting_ok(loop, MAX_NESTING):
        return ()
    walked = ast.unparse(loop.iter)
    return tuple((n.id, walked) for n in ast.walk(loop.target) if isinstance(n, ast.Name))


@lru_cache(maxsize=16384)
def _walrus_names(term: str) -> tuple[tuple[str, str], ...]:
    """`(pooling_type := self.pooling_type)` in a guard: the name, read as its value."""
    node = parse_term(term) if ":=" in term else None
    if node is None:
        return ()
    return tuple((n.target.id, ast.unparse(n.value)) for n in ast.walk(node)
                 if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name))


def _validated_field(site: RaiseSite, function: str) -> str:
    """The field a pydantic `field_validator` validates: its first argument where the excerpt
    shows the decorator, else the function's name (`validate_mode_before` -> `mode`)."""
    e = site.excerpt
    lines = e.lines[: max(0, site.line - e.start)]
    for n in range(len(lines) - 1, -1, -1):
        if re.match(rf"\s*(?:async\s+)?def\s+{re.escape(function)}\b", lines[n]):
            for above in reversed(lines[max(0, n - 6) : n]):
                m = re.search(r"""field_validator\(\s*['"](\w+)['"]""", above)
                if m:
                    return m.group(1)
            break
    return re.sub(r"^_*(validate|check|verify)_|_(before|after|wrap)$", "", function)


def _dedupe(inputs: Iterable[Input]) -> tuple[Input, ...]:
    seen: dict[tuple[str, str], Input] = {}
    for i in inputs:
        seen.setdefault((i.kind, i.key), i)
    return tuple(seen.values())


_LAUNCH_FILES = ("vllm/config/", "vllm/engine/arg_utils.py", "vllm/entrypoints/cli/", "vllm/entrypoints/utils.py")
_MODEL_FILES = ("vllm/model_executor/models/", "vllm/transformers_utils/", "vllm/model_executor/model_loader/",
                "vllm/model_executor/layers/quantization/")
_RUNTIME_FILES = ("vllm/platforms/", "vllm/distributed/", "vllm/device_allocator/", "vllm/v1/worker/")


def reachability(file: str, inputs: Sequence[Input]) -> tuple[str, str]:
    kinds = {i.kind for i in inputs}
    if FLAG in kinds or ENV in kinds:
        return LAUNCH, "its guard reads a flag or an environment variable"
    if REQUEST_FIELD in kinds:
        return REQUEST, "its guard reads a field of the request"
    if kinds & {CONFIG_JSON, CHECKPOINT}:
        return MODEL, "its guard reads the model's config.json or what vLLM derives from it"
    if HARDWARE in kinds:
        return RUNTIME, "its guard reads the platform, device or process it runs on"
    for prefixes, cls in ((REQUEST_FILES, REQUEST), (_LAUNCH_FILES, LAUNCH), (_MODEL_FILES, MODEL),
                          (_RUNTIME_FILES, RUNTIME)):
        if file.startswith(prefixes):
            return cls, f"where it is raised ({file}): its guard names nothing kb resolves to a user's input"
    return INVARIANT, "nothing its guard reads is set by users, as far as kb follows it"


class SetByReader:
    """Resolves sites against one tree's flag model with the default rules (or given ones)."""

    def __init__(self, model: Optional[ConfigModel], rules: Optional[Sequence[Rule]] = None) -> None:
        self.resolver = Resolver(rules if rules is not None else default_rules(model))
        self.envs = frozenset(e.name for e in model.env) if model is not None else frozenset()
        self.keys = frozenset(k.key for k in model.config_keys) if model is not None else frozenset()
        self.cache: dict[tuple[str, int, str], tuple[tuple[Input, ...], int]] = {}
        self.scopes: dict[tuple[str, int, str], Scope] = {}

    def inputs(self, site: RaiseSite) -> tuple[tuple[Input, ...], int]:
        key = (site.file, site.line, site.id)
        if key not in self.cache:
            self.cache[key] = self._inputs(site)
        return self.cache[key]

    def scope(self, site: RaiseSite) -> Scope:
        key = (site.file, site.line, site.id)
        if key not in self.scopes:
            self.scopes[key] = scope_of(site)
        return self.scopes[key]

    def _inputs(self, site: RaiseSite) -> tuple[tuple[Input, ...], int]:
        scope = self.scope(site)
        found: list[Input] = []
        unparsed = 0
        for term in site.fact.guard_terms:
            if parse_term(term) is None:
                unparsed += 1
                continue
            found += self.resolver.resolve_text(term, scope)
        return tuple(input_page(self.envs, self.keys, i) for i in _dedupe(found)), unparsed

    def trigger(self, site: RaiseSite) -> str:
        scope = self.scope(site)
        memo: dict[str, Optional[str]] = {}
        terms = [self.resolver.rewrite(t, scope, 0, memo) for t in site.fact.guard_terms]
        return " and ".join(f"({t})" if len(terms) > 1 and " or " in t else t for t in terms)

    def set_by(self, sites: Sequence[RaiseSite], siblings: Sequence[RaiseSite] = ()) -> SetBy:
        """`sites` of one id; `siblings`: every site of the same file (for the earlier checks)."""
        first = sites[0]
        inputs, unparsed = self.inputs(first)
        for s in sites[1:]:
            more, bad = self.inputs(s)
            inputs, unparsed = _dedupe(inputs + more), unparsed + bad
        earlier: list[Input] = []
        for s in earlier_checks(first, siblings):
            earlier += self.inputs(s)[0]
        seen = {(i.kind, i.key) for i in inputs}
        cls, basis = reachability(first.file, inputs)
        return SetBy(inputs, tuple(i for i in _dedupe(earlier) if (i.kind, i.key) not in seen), cls, basis,
                     self.trigger(first), unparsed)


def earlier_checks(site: RaiseSite, siblings: Sequence[RaiseSite]) -> list[RaiseSite]:
    """Raises before this one in the same function under the same enclosing conditions: vLLM
    reaches this raise only when none of them raised."""
    inside = site.fact.guard_terms[:-1]
    if not inside:
        return []
    return [s for s in siblings if s.fact.qualname == site.fact.qualname and s.line < site.line
            and s.fact.guard_terms[: len(inside)] == inside and s.id != site.id]
