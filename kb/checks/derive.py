"""Checks derived from vLLM's own guards: every raise site of `vllm/config/` and
`vllm/engine/arg_utils.py` whose guard reads only launch-time facts becomes a check, compiled once
from the scan and run on each launch by the safe evaluator (kb/checks/evaluate.py).

Compiling a site substitutes, in vLLM's own condition:
- the locals it assigned before the raise (`fact.locals`), and the argument its one caller in the
  same file passes for a parameter (`fact.callers`);
- each field of a config by what `create_engine_config` passes for it (`ConfigModel.builds`,
  read in EngineArgs' scope: `self.max_cpu_loras if self.max_cpu_loras and ... else None`), and the
  condition the config is built under (`LoRAConfig(...) if self.enable_lora else None`);
- a local an if/elif chain assigns, or a list `if`s append to, by that chain as one expression
  (kb.config.flow); a config's property or small method by what it computes (kb.config.members);
- every remaining reference by a named value (`Ref`): a flag (as vLLM's parser reads it, else its
  default), a key of a JSON-valued flag, a config.json key, an environment variable, a fact of
  the platform (`current_platform.is_cuda()`), or a module-level value of vLLM's source (a
  constant, `get_args` of a Literal alias, a flag enum's member, a registry only plugins fill:
  kb.config.names; kb checks vLLM as installed, without plugins).

A value is read where vLLM reads it: an early exit's test at its line, a local where it is
assigned (kb.config.flow); a field validator before the config's own code runs, a config vLLM's
parser makes from a flag's JSON before any other code; a method of a config's `__post_init__`
only when it runs before the site (kb.config.order.post_init_order), VllmConfig's by-name defaults
only for the keys of the tables they walk (name_filled). The condition holds three-valued: an
operand kb cannot know does not hide one that decides it (kb/checks/evaluate.py `holds`).

The request's checks are compiled the same way: every raise site of `vllm/sampling_params.py` that
runs for a `SamplingParams` (its `__post_init__` and `verify`, and what they call), a field of it a
`request` ref (the request's value, else the field's default; unknown where `__post_init__` changes
it first, under the conditions it does). They run only when `kb check` is given a request.

What cannot be compiled so is `Uncheckable`, with the reason (the first reference kb cannot give a
value to, or a construct outside the evaluator). Nothing of vLLM is imported or run.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import enum
import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from kb.checks.computed import COMPUTED_PROPERTIES, SET_IN, Computed, Hardware, compute, modelled
from kb.checks.evaluate import ALL_METHODS, DERIVED_FUNCTIONS, MATH_FUNCTIONS, check_whitelist, evaluate, holds, shorten
from kb.checks.jsonfields import MISSING as JSON_MISSING
from kb.checks.jsonfields import converter
from kb.checks.order import REQUEST_FILE
from kb.config.model import Build, ConfigModel, Flag
from kb.config.order import REQUEST_CLASS
from kb.config.resolve import (
    _BUILTINS,
    CHECKPOINT,
    CONFIG_JSON,
    ENV,
    FLAG,
    HARDWARE,
    INTERNAL,
    REQUEST_FIELD,
    UNRESOLVED,
    FlagRule,
    Input,
    Scope,
    SetByReader,
    _chain,
    _named_attribute,
    _parse,
    scope_of,
)
from kb.errors import ExprError, MissingInput
from kb.model import REACH_UNKNOWN, Caller, LocalDef, RaiseSite
from kb.scan.messages import placeholders

LAUNCH_FILES = ("vllm/config/", "vllm/engine/arg_utils.py")
# the request model: each request's sampling parameters are checked as it is made (`__post_init__`)
# and when the engine takes the request (`verify`, with the model's config): its fields are `request` refs
REQUEST_ENTRIES = ("__post_init__", "verify")  # the methods of REQUEST_CLASS (in REQUEST_FILE) run for every request
ENGINE_FILE = "vllm/engine/arg_utils.py"
MAX_DEPTH = 8  # locals, callers and build arguments followed one through another
MAX_REFS = 32  # values one check reads
DERIVED_FORMAT = "kb-derived/1"

# What vLLM's platform answers on the hardware `kb check` assumes: an NVIDIA GPU (CUDA), as the
# oracle fakes it (bench/oracle/). A platform call not listed is not known before launch.
PLATFORMS: dict[str, dict[str, Any]] = {
    "cuda": {"is_cuda": True, "is_cuda_alike": True, "is_rocm": False, "is_tpu": False, "is_xpu": False,
             "is_cpu": False, "is_out_of_tree": False, "is_neuron": False, "is_hpu": False,
             "is_sleep_mode_available": True, "is_cumem_allocator_available": True, "is_pin_memory_available": True,
             "is_async_output_supported": True, "device_type": "cuda", "device_name": "cuda", "simple_compile_backend": "inductor",
             "dispatch_key": "CUDA", "ray_device_key": "GPU", "device_control_env_var": "CUDA_VISIBLE_DEVICES"},
}
_PLATFORM_CALL = re.compile(r"current_platform\.(\w+)(\(\))?")
# config.json keys vLLM falls back from when they are absent (vllm/config/model_arch.py)
KEY_FALLBACKS = {"num_key_value_heads": "num_attention_heads"}


@dataclass(frozen=True)
class Ref:
    """One value a derived check reads: `name` in its expression."""

    name: str
    kind: str  # flag, flag-given (its value known only when given), flag-key (flag-key-given), given, config-json,
    # env, platform, computed (what vLLM computes before its guards: kb/checks/computed.py), value (a
    # module-level value of vLLM's source: kb.config.names; `key` is its tagged JSON),
    # unknown (what kb cannot give before launch: `shown` says why)
    key: str  # the flag's dest; "dest.key" of a JSON-valued flag; the config.json key; the variable; the call
    shown: str  # as users name it: --tensor-parallel-size, config.json num_attention_heads

    def to_json(self) -> list[str]:
        return [self.name, self.kind, self.key, self.shown]


@dataclass(frozen=True)
class Derived:
    """vLLM's condition for one raise site, over launch-time values."""

    record_id: str
    file: str
    line: int
    expr: str
    refs: tuple[Ref, ...]
    message: tuple[tuple[str, str], ...] = ()  # placeholder of the template -> its compiled expression
    # the JSON-valued flag (its dest) whose value vLLM's parser turns into the config the raise is
    # in: the error stops the command line, wrapped by pydantic (kb/checks/launch_check.py)
    parsed_by: str = ""
    config_class: str = ""
    field: str = ""  # the field a field validator checks; "" for __post_init__ and model validators

    def to_json(self) -> list[Any]:
        return [self.record_id, self.file, self.line, self.expr, [r.to_json() for r in self.refs],
                [list(m) for m in self.message], self.parsed_by, self.config_class, self.field]

    @staticmethod
    def from_json(d: list[Any]) -> Derived:
        return Derived(d[0], d[1], d[2], d[3], tuple(Ref(*r) for r in d[4]), tuple((m[0], m[1]) for m in d[5]),
                       d[6], d[7], d[8])


@dataclass(frozen=True)
class Passed:
    """What create_engine_config passes for a field with pydantic constraints (`data_parallel_rank=
    self.data_parallel_rank or 0`), over launch values; `when`: the condition the config is built
    under ("" always)."""

    config_class: str
    field: str
    expr: str
    when: str
    refs: tuple[Ref, ...]
    constraints: tuple[tuple[str, Any], ...]

    def to_json(self) -> list[Any]:
        return [self.config_class, self.field, self.expr, self.when, [r.to_json() for r in self.refs],
                [list(c) for c in self.constraints]]

    @staticmethod
    def from_json(d: list[Any]) -> Passed:
        return Passed(d[0], d[1], d[2], d[3], tuple(Ref(*r) for r in d[4]), tuple((c[0], c[1]) for c in d[5]))


@dataclass(frozen=True)
class Uncheckable:
    record_id: str
    file: str
    line: int
    reason: str


@dataclass(frozen=True)
class DerivedIndex:
    """The derived checks of one tree, and why the other config-time sites are not checkable."""

    checks: tuple[Derived, ...]
    uncheckable: tuple[Uncheckable, ...]
    passed: tuple[Passed, ...] = ()

    @property
    def sites(self) -> int:
        return len(self.checks) + len(self.uncheckable)

    def to_json(self) -> dict[str, Any]:
        return {"format": DERIVED_FORMAT, "checks": [c.to_json() for c in self.checks],
                "uncheckable": [[u.record_id, u.file, u.line, u.reason] for u in self.uncheckable],
                "passed": [p.to_json() for p in self.passed]}

    @staticmethod
    def from_json(d: dict[str, Any]) -> DerivedIndex:
        if d.get("format") != DERIVED_FORMAT:
            raise ValueError(f"not {DERIVED_FORMAT}")
        return DerivedIndex(tuple(Derived.from_json(c) for c in d["checks"]),
                            tuple(Uncheckable(*u) for u in d["uncheckable"]),
                            tuple(Passed.from_json(p) for p in d["passed"]))


class _Fail(Exception):
    """The site is not checkable: why."""


class _Unknown(_Fail):
    """A value kb cannot give before launch: the check reads it as an unknown input, which
    makes it unknown only when vLLM's condition needs it (`a is not None and a.x()`)."""


_ENGINE_SCOPE = Scope(ENGINE_FILE, "EngineArgs", "create_engine_config")
_VLLM_SCOPE = Scope("vllm/config/vllm.py", "VllmConfig", "__post_init__")


class _Compiler:
    def __init__(self, model: ConfigModel) -> None:
        self.model = model
        self.reader = SetByReader(model)
        self.flags_by_name = {f.name: f for f in model.flags}
        self.builds: dict[str, Build] = {b.config_class: b for b in model.builds}
        self.flag_rule = FlagRule(model)
        self.class_names = {c.replace("_", "").lower(): c for c in
                            {*(c for c, _, _ in model.class_defaults), *(b.config_class for b in model.builds)}}
        self.assignments: dict[tuple[str, str], list[tuple[str, str, int, str]]] = {}
        self.fully_set: set[str] = set()  # configs whose fields vLLM sets by name (`setattr(self.x_config, ...)`)
        self.anything_set: dict[str, str] = {}  # class -> how its code sets any config's field by name
        setters: dict[str, set[str]] = {}  # class -> the methods that do
        for c, a, how, method, line, when in model.assigned:
            if not a.startswith("@"):
                self.assignments.setdefault((c, a), []).append((how, method, line, when))
                continue
            holder, _, name = a[1:].partition(".")  # `self.kernel_config.x = ...`: a field of KernelConfig
            if holder == "*":  # setattr(config_obj, key, ...): any field of any config, from that class's code
                self.anything_set[c] = "set" if how == "set" or self.anything_set.get(c) == "set" else "default"
                setters.setdefault(c, set()).add(method)
                continue
            cls = self.class_names.get(holder.replace("_", "").lower())
            if cls is not None and name == "*":
                self.fully_set.add(cls)
            elif cls is not None:
                self.assignments.setdefault((cls, name), []).append(("set", f"{c}.{method}", line, "?"))
        # class -> the (holder, field) its by-name setters can fill, where kb.config.order read them all; else None
        fills: dict[tuple[str, str], set[tuple[str, str]]] = {}
        for c, setter, holder, name in model.name_filled:
            fills.setdefault((c, setter), set()).add((holder, name))
        self.by_name: dict[str, Optional[set[tuple[str, str]]]] = {}
        self.by_name_setters = setters
        self.post_init_order = {(c, m): line for c, m, line in model.post_init_order}
        for c, methods in setters.items():
            known = [fills.get((c, m)) for m in methods]
            self.by_name[c] = None if any(k is None or ("*", "*") in k for k in known) else \
                set().union(*(k for k in known if k is not None))
        self.here: tuple[str, str, int] = ("", "", 0)  # the class, function and line of the site compiled
        self.site_file = ""
        self.in_own = False  # compiling the condition of a config's own change (own_changed_when)
        self.validating = ""  # the class of the field validator compiled, if it is one
        self.parsed_by: Optional[tuple[Flag, str]] = None  # the JSON-valued flag the site's config is parsed from
        self.class_defaults = {(c, f): v for c, f, v in model.class_defaults}
        self.late_methods = frozenset(m for _, m, _ in model.config_calls)  # what VllmConfig.__post_init__ calls
        self.late_site = False  # the site runs once VllmConfig is built (its own method, or one it calls)
        self.engine_configs = {name: cls for name, cls, _ in model.engine_configs}
        self.filling: set[str] = set()  # flags whose change condition is being compiled
        self.bound: frozenset[str] = frozenset()  # names a loop or comprehension of the guard binds
        self.conditional: dict[int, frozenset[str]] = {}  # id of a scope -> its locals assigned conditionally
        self.alive: list[Scope] = []  # the scopes those ids are of, held while a site is compiled
        # a config that a JSON-valued flag parses into: built from that flag's value
        self.parsed_into: dict[str, Flag] = {}
        for f in sorted(model.flags, key=lambda f: f.name):
            if f.parses_into and f.action == "store":
                self.parsed_into.setdefault(f.parses_into, f)
        self.refs: dict[tuple[str, str], Ref] = {}
        self.module_names = {(f, name, kind): value for f, name, kind, value in model.module_names}
        self.exit_lines = {(f, q, _canonical(text)): line for f, q, line, text in model.exits}
        self.chains = {(f, q, name): (first, last, e) for f, q, name, first, last, e in model.chains}
        self.site_locals: dict[str, LocalDef] = {}
        self.site_function = ""
        # the line the value compiled is read at, in the site's own function (an early exit's test, a
        # local's assignment): that function's assignments after it do not count (effective)
        self.read_line: Optional[int] = None
        # (class as FlagRule keys it, member) -> (file, class, expression): properties and small methods
        self.members = {(c.replace("_", "").lower(), m): (f, c, e) for f, c, m, e in model.members}

    # --- a site ------------------------------------------------------------------------------
    def site(self, site: RaiseSite) -> Derived | Uncheckable:
        if site.file == REQUEST_FILE:  # the request kb checks is a SamplingParams: other classes' calls are other requests
            callers = tuple(c for c in site.fact.callers if c.qualname.split(".")[0] in (REQUEST_CLASS, c.qualname))
            site = dataclasses.replace(site, fact=dataclasses.replace(site.fact, callers=callers))
        self.refs = {}
        self.bound = frozenset()
        self.parsed_by = None
        qual = site.fact.qualname.split(".")
        self.here = (qual[-2] if len(qual) > 1 else "", qual[-1], site.line)
        self.site_file = site.file
        # read points only where the function runs once through: not in a loop
        in_loop = any(c.kind in ("for", "while", "for-else", "while-else") for c in site.fact.contexts)
        self.site_locals = {} if in_loop else {d.name: d for d in site.fact.locals}
        self.site_function = site.fact.qualname
        self.read_line = None
        self.late_site = qual[0] == "VllmConfig"
        # a field validator runs as pydantic validates what the config is built from: before the
        # config's own code (its __post_init__, model validators, other methods) changes a field
        self.validating = self.here[0] if site.fact.validation == "field_validator" and len(qual) == 2 else ""
        try:
            if not site.fact.guard_terms:
                raise _Fail("no condition: raised whenever its function runs, which kb does not follow")
            scope = scope_of(site)
            self.alive = [scope]
            self.conditional = {id(scope): frozenset(d.name for d in site.fact.locals if d.conditional)}
            terms = self.when_built(site, scope)
            inside = self.loops(site, scope)
            if REACH_UNKNOWN in site.fact.exits:
                raise _Fail("raised inside a `try`, a `while` or a `match`, or after an exit kb does not read")
            body = [self.exit_term(t, scope, None if in_loop else
                                   self.exit_lines.get((site.file, site.fact.qualname, _canonical(t))))
                    for t in site.fact.exits]
            body += [self.term(t, scope, 0) for t in site.fact.guard_terms]
            loop_names = self.bound
            self.bound = frozenset()
            if inside:  # raised in a loop: vLLM's condition for any of its items; what reads no item, outside
                outside = [t for t in body if not _reads(t, loop_names)]
                per_item = [t for t in body if _reads(t, loop_names)]
                terms += outside
                terms.append(ast.Call(ast.Name("any", ast.Load()), [ast.GeneratorExp(_all(per_item), inside)], []))
            else:
                terms += body
            node: ast.expr = ast.BoolOp(ast.And(), terms) if len(terms) > 1 else terms[0]
            node = ast.fix_missing_locations(node)
            check_whitelist(node, derived=True)
            expr = ast.unparse(node)
            if len(self.refs) > MAX_REFS:
                raise _Fail(f"reads more than {MAX_REFS} values")
            guard_refs = dict(self.refs)
            message = self.message(site, scope)
            extra = {k: v for k, v in self.refs.items() if k not in guard_refs}
        except _Fail as e:
            return Uncheckable(site.id, site.file, site.line, str(e))
        except ExprError as e:
            return Uncheckable(site.id, site.file, site.line, f"outside kb's evaluator: {e.message}")
        except (RecursionError, ValueError):
            return Uncheckable(site.id, site.file, site.line, "nested too deeply once its locals are substituted")
        refs = tuple(sorted({**guard_refs, **extra}.values(), key=lambda r: int(r.name[2:])))
        if self.parsed_by is None:
            return Derived(site.id, site.file, site.line, expr, refs, message)
        flag, cls = self.parsed_by
        field_name = scope.validated.get("value", "") if site.fact.validation == "field_validator" else ""
        return Derived(site.id, site.file, site.line, expr, refs, message, flag.dest, cls, field_name)

    def loops(self, site: RaiseSite, scope: Scope) -> list[ast.comprehension]:
        """The `for` loops the raise is in, outermost first, as the generators of a comprehension
        (their collections compiled, their names then bound: self.bound)."""
        out: list[ast.comprehension] = []
        for c in site.fact.contexts:
            if c.kind != "for":
                continue
            try:
                loop = ast.parse(c.source.rstrip(":") + ":\n    pass").body[0] if len(c.source) <= 2000 else None
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                loop = None
            if not isinstance(loop, ast.For) or not all(isinstance(t, (ast.Name, ast.Tuple, ast.Store))
                                                        for t in ast.walk(loop.target)):
                raise _Fail(f"raised inside the loop `{c.source[:60]}`, which kb does not read")
            collection = self.term(ast.unparse(loop.iter), scope, 0)
            self.bound = self.bound | {t.id for t in ast.walk(loop.target) if isinstance(t, ast.Name)}
            out.append(ast.comprehension(loop.target, collection, [], 0))
        return out

    def when_built(self, site: RaiseSite, scope: Scope) -> list[ast.expr]:
        """The condition its function runs under, as far as kb reads it: a config's validators and
        `__post_init__` run when create_engine_config builds it; another function runs where its
        callers in the same file call it (their conditions, and theirs in turn)."""
        if any(c.kind in _LOOPS for c in site.fact.contexts):
            raise _Fail("raised inside a `while` loop, a loop's `else` or a `match`: kb does not follow it")
        return self.runs_when(site.fact.qualname, site.fact.validation, site.file, site.fact.callers, scope, 0)

    def runs_when(self, qualname: str, validation: Optional[str], file: str, callers: Sequence[Caller],
                  scope: Scope, depth: int) -> list[ast.expr]:
        qual = qualname.split(".")
        owner = qual[0] if len(qual) > 1 and qual[0][:1].isupper() else ""
        if file == ENGINE_FILE and owner == "EngineArgs" and qual[-1] in ("__post_init__", "create_engine_config"):
            return []
        if file == REQUEST_FILE and owner == REQUEST_CLASS and len(qual) == 2 and qual[-1] in REQUEST_ENTRIES:
            return []  # runs for every request: as its sampling parameters are made, or as the engine takes it
        if owner and len(qual) == 2 and (validation is not None or qual[-1] in ("__post_init__", "__init__")):
            return self.built(owner)
        if owner and len(qual) == 2 and not callers and owner != "VllmConfig":
            called = self.called_by_vllm_config(owner, qual[-1], depth)
            if called is not None:
                return called
        if depth >= 3 or not callers:
            where = "" if callers else ", and nothing in its file calls it"
            raise _Fail(f"raised in {qualname}{where}: kb does not follow it to a config built at launch")
        alternatives: list[ast.expr] = []
        for c in callers:
            if REACH_UNKNOWN in c.guard:
                raise _Fail(f"{qualname} is called by {c.qualname} (line {c.line}) in a loop, a `try`, a `with` "
                            "or a `match`")
            inner = self.caller_scope(scope, c)
            conditions = [self.term(g, inner, depth + 1) for g in c.guard]
            conditions = self.runs_when(c.qualname, None, file, c.callers, inner, depth + 1) + conditions
            alternatives.append(_all(conditions))
        return [alternatives[0] if len(alternatives) == 1 else ast.BoolOp(ast.Or(), alternatives)]

    def called_by_vllm_config(self, owner: str, method: str, depth: int) -> Optional[list[ast.expr]]:
        """Where VllmConfig.__post_init__ calls a config's method (`self.model_config.verify_with_parallel_config`):
        VllmConfig is always built, so the call's own conditions; None when it does not."""
        key = owner.replace("_", "").lower()
        for attribute, called, condition in self.model.config_calls:
            if called != method or self.flag_rule.owner_key(attribute) != key:
                continue
            if condition == "?":
                raise _Fail(f"{owner}.{method} is called by VllmConfig in a loop, a `try`, a `with` or a `match`")
            self.late_site = True
            return [self.term(condition, _VLLM_SCOPE, depth + 1)] if condition else []
        return None

    def built(self, owner: str) -> list[ast.expr]:
        build = self.builds.get(owner)
        if build is None and owner in self.parsed_into:
            self.parsed_by = (self.parsed_into[owner], owner)
            return [self.given(self.parsed_into[owner])]  # kb knows its fields only from the JSON given
        if build is None:
            raise _Fail(f"{owner} is not built by create_engine_config as kb reads it")
        if build.when == "?":
            raise _Fail(f"{owner} is built in a loop, a `try` or a `with` of create_engine_config")
        return [self.term(build.when, _ENGINE_SCOPE, 0, engine=True)] if build.when else []

    # --- terms ---------------------------------------------------------------------------------
    def term(self, text: str, scope: Scope, depth: int, engine: bool = False) -> ast.expr:
        if depth > MAX_DEPTH:
            raise _Fail("locals followed too deep")
        node = _parse(text)
        if node is None:
            raise _Fail(f"not parsed: {text[:80]}")
        return self.swap(copy.deepcopy(node), scope, depth, engine)

    def swap(self, node: ast.expr, scope: Scope, depth: int, engine: bool) -> ast.expr:
        compiler = self

        class _T(ast.NodeTransformer):
            def visit(self, n: ast.AST) -> Any:
                if isinstance(n, ast.NamedExpr):
                    return self.visit(n.value)
                if isinstance(n, (ast.GeneratorExp, ast.ListComp, ast.SetComp)):
                    return compiler.comprehension(n, self)
                if isinstance(n, ast.Name) and n.id in compiler.bound:
                    return n  # a loop's own name
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) \
                        and f"{n.func.value.id}_{n.func.attr}" in MATH_FUNCTIONS and len(n.args) == 1 and not n.keywords \
                        and "math" not in scope.locals:  # math.isfinite(x): the evaluator's own
                    return ast.Call(ast.Name(f"math_{n.func.attr}", ast.Load()), [self.visit(n.args[0])], [])
                if isinstance(n, (ast.Attribute, ast.Name, ast.Call)):
                    done = compiler.reference(n, scope, depth, engine)
                    if done is not None:
                        return done
                if isinstance(n, ast.Call) and not _callable(n):  # getattr(<a local>, "x"), issubclass(...)
                    text = _short(ast.unparse(n))
                    return compiler.named("unknown", text, f"{text}: a call kb does not evaluate")
                return self.generic_visit(n)

        out = _T().visit(node)
        assert isinstance(out, ast.expr)
        return out

    def caller_scope(self, scope: Scope, c: Caller) -> Scope:
        inner = scope.of_caller(c)
        self.alive.append(inner)
        self.conditional[id(inner)] = frozenset(d.name for d in c.locals if d.conditional)
        return inner

    def passed(self) -> tuple[Passed, ...]:
        """The arguments create_engine_config passes for fields with pydantic constraints, compiled."""
        limits = {(j.config_class, j.name): j.constraints for j in self.model.json_fields if j.constraints}
        out: list[Passed] = []
        for b in self.model.builds:
            if b.when == "?":
                continue
            for name, source in b.args:
                if (b.config_class, name) not in limits:
                    continue
                self.refs, self.bound, self.here = {}, frozenset(), ("EngineArgs", "create_engine_config", b.line)
                self.late_site = False
                self.validating = ""
                self.parsed_by = None
                self.conditional = {}
                try:
                    value = ast.fix_missing_locations(self.term(source, _ENGINE_SCOPE, 0, engine=True))
                    when = ast.fix_missing_locations(self.term(b.when, _ENGINE_SCOPE, 0, engine=True)) if b.when else None
                    for node in (value, when):
                        if node is not None:
                            check_whitelist(node, derived=True)
                except (_Fail, ExprError, RecursionError, ValueError):
                    continue
                refs = tuple(sorted(self.refs.values(), key=lambda r: int(r.name[2:])))
                out.append(Passed(b.config_class, name, ast.unparse(value), ast.unparse(when) if when is not None else "",
                                  refs, limits[(b.config_class, name)]))
        return tuple(out)

    def comprehension(self, n: ast.GeneratorExp | ast.ListComp | ast.SetComp, visitor: ast.NodeTransformer) -> ast.expr:
        """`f(x) for x in xs if g(x)`: each loop's collection read in the scope around it, its own
        names kept (self.bound) in what follows."""
        saved = self.bound
        try:
            for gen in n.generators:
                gen.iter = visitor.visit(gen.iter)
                self.bound = self.bound | {t.id for t in ast.walk(gen.target) if isinstance(t, ast.Name)}
                gen.ifs = [visitor.visit(c) for c in gen.ifs]
            n.elt = visitor.visit(n.elt)
        finally:
            self.bound = saved
        return n

    def reference(self, n: ast.expr, scope: Scope, depth: int, engine: bool) -> Optional[ast.expr]:
        """The node rewritten when it is a chain kb gives a value to (an unknown input when it
        cannot); None to look inside it."""
        parts = _chain(n)
        if parts is not None and parts[0] in self.bound:
            return None  # `item.x` of a loop's item: left as written (the evaluator reads no attribute)
        saved = dict(self.refs)
        try:
            return self._reference(n, scope, depth, engine)
        except _Unknown as e:
            self.refs = saved
            text = _short(ast.unparse(n))
            return self.named("unknown", text, f"{text}: {e}")

    def _reference(self, n: ast.expr, scope: Scope, depth: int, engine: bool) -> Optional[ast.expr]:
        named = self.module_name(n, scope)
        if named is not None:
            return named
        parts = _named_attribute(n) or _chain(n)
        if parts is None or (len(parts) == 1 and parts[0] in _BUILTINS):
            return None
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _BUILTINS:
            return None
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _METHODS and \
                _chain(n.func.value) is None:
            return None  # a method of a value computed in the guard: `x.lower()` of `(a or b)`
        head = parts[0]
        if len(parts) == 2 and parts[1] in COMPUTED_PROPERTIES and modelled(self.model, parts[1]) and (
                (head == "self" and scope.owner == "ModelConfig") or
                (engine and self.engine_configs.get(head) == "ModelConfig" and head not in scope.locals)):
            return self.named("computed", parts[1], f"{parts[1]} as vLLM computes it")
        if engine and head in self.engine_configs and head not in scope.locals:
            return self._reference(n, scope, depth, False)  # `model_config.x`: the field of the config it built
        if engine and head != "self" and not (len(parts) == 1 and head in scope.locals):
            raise _Unknown(f"{'.'.join(parts)[:80]}: a local of create_engine_config, not followed")
        if head in scope.locals and not (len(parts) > 1 and head.endswith("_config")):
            own = scope is self.alive[0] and head in self.site_locals  # a local of the site's own function
            chain = self.chains.get((scope.file, self.site_function, head)) if own else None
            at = self.site_locals[head].line if own else None
            if chain is not None and at is not None and chain[0] <= at <= chain[1]:
                # assigned along an if/elif chain: one conditional expression, read where the chain is
                value = self.read_at(chain[1], lambda: self.term(chain[2], scope, depth + 1, engine))
                return self.tail(value, parts[1:], n, scope, depth, engine)
            if head in self.conditional.get(id(scope), frozenset()):
                raise _Unknown(f"{head}: assigned in a block that does not enclose the raise, so it may hold "
                               "an earlier value")
            source = re.sub(r"^copy\.(?:deep)?copy\((.*)\)$", r"\1", scope.locals[head])
            inner = scope
            if re.search(rf"\b{re.escape(head)}\b", source):  # `x = x or 1`: the earlier x
                inner = Scope(scope.file, scope.owner, scope.function,
                              {k: v for k, v in scope.locals.items() if k != head}, scope.validated, scope.callers)
                self.alive.append(inner)  # held: its id keys its conditional locals
                self.conditional[id(inner)] = self.conditional.get(id(scope), frozenset())
            value = self.read_at(at, lambda: self.term(source, inner, depth + 1, engine))  # read where assigned
            return self.tail(value, parts[1:], n, inner, depth, engine)
        if head in scope.params and not head.endswith("_config"):
            if len(scope.callers) != 1:
                raise _Unknown(f"the parameter {head}: {len(scope.callers)} calls pass it")
            c = scope.callers[0]
            arg = next((a for a in c.args if a.param == head), None)
            if arg is None:
                raise _Unknown(f"the parameter {head}: passed through *args or **kwargs")
            caller = self.caller_scope(scope, c)
            return self.tail(self.term(arg.source, caller, depth + 1, engine), parts[1:], n, caller, depth, engine)
        build = self.builds.get(scope.owner) if scope.function == "__post_init__" and not scope.callers else None
        if build is not None and len(parts) == 1 and head in dict(build.args) and head not in scope.locals:
            # an InitVar of a config's __post_init__ (`max_model_len`): what create_engine_config passes
            return self.term(dict(build.args)[head], _ENGINE_SCOPE, depth + 1, engine=True)
        text = ast.unparse(n) if isinstance(n, ast.Call) else ".".join(parts)
        found = self.reader.resolver.resolve(parts, text, scope, depth)
        if len(found) != 1 or found[0].kind in (INTERNAL, CHECKPOINT, UNRESOLVED):
            computed = self.member(parts, n, scope, depth)
            if computed is not None:
                return computed
        if len(found) != 1:
            raise _Unknown(f"{text[:80]}: not resolved to one input")
        return self.ref_of(found[0], parts, n, depth, engine)

    def member(self, parts: tuple[str, ...], n: ast.expr, scope: Scope, depth: int) -> Optional[ast.expr]:
        """A config's property or method that kb.config.members summarises (`self.parallel_config.use_ubatching`):
        its expression, compiled in its own class (`self` is that config); None when there is none."""
        if isinstance(n, ast.Call) and (n.args or n.keywords):
            return None
        owner = self.flag_rule.owner_of(parts[0], scope)
        rest = parts[1:]
        while owner is not None and len(rest) > 1 and rest[0].endswith("_config"):
            owner = self.flag_rule.owner_key(rest[0])
            rest = rest[1:]
        if owner is None or len(rest) != 1 or (rest[0].endswith("()") != isinstance(n, ast.Call)):
            return None
        found = self.members.get((owner, rest[0]))
        if found is None:
            return None
        file, cls, source = found
        try:
            return self.term(source, Scope(file, cls, rest[0].removesuffix("()")), depth + 1)
        except _Fail as e:
            raise _Unknown(f"{cls}.{rest[0]}: {e}") from None

    def module_name(self, n: ast.expr, scope: Scope) -> Optional[ast.expr]:
        """A module-level name of the file that the tree gives a value (kb.config.names): a
        constant, `get_args` of a Literal alias, a registry only plugins fill (`f()`, empty)."""
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "get_args" and \
                len(n.args) == 1 and not n.keywords and isinstance(n.args[0], ast.Name):
            name, kind = n.args[0].id, "literal"
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and not n.args and not n.keywords:
            name, kind = n.func.id, "call"
        elif isinstance(n, ast.Name):
            name, kind = n.id, "value"
        elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):  # KVCacheAccess.EXPORTS_FD
            name, kind = n.value.id, "enum"
        else:
            return None
        if name in scope.locals or name in scope.params or name in self.bound:
            return None
        found: Any = self.module_names.get((scope.file, name, kind))
        if not isinstance(found, list):
            return None
        if kind == "literal":
            found = ["tuple", [["const", v] for v in found if isinstance(v, (str, int, float, bool)) or v is None]]
        if kind == "enum":
            assert isinstance(n, ast.Attribute)
            if not any(m == n.attr for m, _ in found[1]):
                return None
            found = ["member", [found[0], found[1], n.attr]]
        text = ast.unparse(n)
        return self.named("value", json.dumps(found, sort_keys=True), f"{text} (vLLM's own {'value' if kind != 'call' else 'registry, empty without plugins'})")

    def exit_term(self, text: str, scope: Scope, line: Optional[int]) -> ast.expr:
        """An early exit's test, its values read at its line."""
        return self.read_at(line, lambda: self.term(text, scope, 0))

    def read_at(self, line: Optional[int], compile_: Callable[[], ast.expr]) -> ast.expr:
        """What `compile_` gives with its values read at `line` of the site's function (not later)."""
        if line is None or (self.read_line is not None and self.read_line <= line):
            return compile_()
        saved = self.read_line
        self.read_line = line
        try:
            return compile_()
        finally:
            self.read_line = saved

    def tail(self, value: ast.expr, rest: tuple[str, ...], n: ast.expr, scope: Scope, depth: int,
             engine: bool) -> ast.expr:
        if not rest:
            return value
        if len(rest) == 1 and rest[0].endswith("()") and rest[0][:-2] in _METHODS and isinstance(n, ast.Call):
            args = [self.swap(copy.deepcopy(a), scope, depth, engine) for a in n.args]
            return ast.Call(ast.Attribute(value, rest[0][:-2], ast.Load()), args, [])
        raise _Unknown(f"{'.'.join(rest)} of a local: not followed")

    def ref_of(self, i: Input, parts: tuple[str, ...], n: ast.expr, depth: int, engine: bool) -> ast.expr:
        last = parts[-1]
        if i.kind == FLAG:
            if last.endswith("()") or "computes" in i.via or "keys given to" in i.via or "builds the config" in i.via:
                raise _Unknown(f"{i.read[:80]}: computed from {i.key}, not its value")
            if "matched by name" in i.via:
                raise _Unknown(f"{i.read[:80]}: a name matched to {i.key}, not followed")
            name, dot, key = i.key.partition(".")
            flag = self.flags_by_name.get(name)
            if flag is None:
                raise _Unknown(f"{i.key}: not a flag of the model")
            if dot:
                cls = flag.parses_into or self.class_names.get(flag.dest.replace("_", "").lower(), "")
                how = self.how_set(cls, key) if cls else None
                if how == "set":
                    raise _Unknown(f"{i.key}: vLLM's own code sets {cls}.{key}")
                if how == "default":
                    return self.named("flag-key-given", f"{flag.dest}.{key}", i.key)
                return self.named("flag-key", f"{flag.dest}.{key}", i.key)
            if engine or i.via.startswith("the field EngineArgs.") or flag.config_field is None:
                return self.flag(flag, engine_field=True)
            if flag.config_class in self.builds:
                return self.built_field(flag, depth)
            whole = self.parsed_into.get(flag.config_class or "")
            if whole is not None:  # the config comes whole from a JSON-valued flag: its key, not this flag
                key, shown = f"{whole.dest}.{flag.config_field}", f"{whole.name}.{flag.config_field}"
                how = self.how_set(flag.config_class or "", flag.config_field or "")
                if how == "set":
                    raise _Unknown(f"{shown}: vLLM's own code sets {flag.config_class}.{flag.config_field}")
                return self.named("flag-key-given" if how == "default" else "flag-key", key, shown)
            raise _Unknown(f"{flag.config_class}.{flag.config_field}: how vLLM builds {flag.config_class} is not read "
                           "by kb")
        if i.kind == CONFIG_JSON:
            if i.key == "config.json":
                raise _Unknown(f"{i.read[:80]}: the whole config.json")
            if last.endswith("()") and last[:-2] not in ("get_total_num_kv_heads", "get_num_attention_heads",
                                                         "get_hidden_size", "get_num_layers", "get_vocab_size"):
                raise _Unknown(f"{i.read[:80]}: computed by vLLM from config.json")
            return self.named("config-json", i.key, f"config.json {i.key}")
        if i.kind == ENV:
            if not re.fullmatch(r"[A-Z_][A-Z0-9_]*", i.key):
                raise _Unknown(f"{i.read[:80]}: an environment variable named at run time")
            return self.named("env", i.key, i.key)
        if i.kind == INTERNAL and (i.via.startswith("the config object") or (
                len(parts) > 1 and last.replace("_", "").lower() in self.flag_rule.names)):  # self.lora_config
            return self.config_object(parts, depth)
        if i.kind == INTERNAL and i.via.startswith("the field ") and "which no `vllm serve` flag sets" in i.via:
            return self.internal_field(i, parts, depth)
        if i.kind == REQUEST_FIELD and i.via.startswith(f"the field {REQUEST_CLASS}."):  # `self.n` of its method
            if len(parts) != 2:  # `self.structured_outputs.json`: an attribute of a field's object
                raise _Unknown(f"{'.'.join(parts)[:80]}: an attribute of the request's {i.key}, not followed")
            return self.request_field(i.key)
        if i.kind == HARDWARE:
            m = _PLATFORM_CALL.fullmatch(i.read)
            if m and m.group(1) in PLATFORMS["cuda"]:
                return self.named("platform", m.group(1), f"the platform ({m.group(1)})")
        raise _Unknown(f"{i.read[:80]}: {i.kind} ({i.via[:80]})")

    def request_field(self, name: str) -> ast.expr:
        """A field of the request's sampling parameters as the guard reads it: the value the request
        gives (else the field's default), or unknown where SamplingParams' own `__post_init__` changes
        it before the site, under the conditions it does (`0 < temperature < _MAX_TEMP`)."""
        value = self.named("request", name, name)
        if self.in_own or self.how_set(REQUEST_CLASS, name) is None:
            return value  # read by the condition it is changed under: the value the request gives
        changed = self.own_changed_when(REQUEST_CLASS, name)
        if changed is None:
            raise _Unknown(f"{name}: SamplingParams' own code sets it")
        unknown = self.named("unknown", f"{name} as vLLM sets it", f"{name}: SamplingParams' own code sets it")
        return ast.IfExp(changed, unknown, value)

    def flag(self, flag: Flag, engine_field: bool = False) -> ast.expr:
        """The flag's value as the guard reads it. When vLLM's own code may change it first: where
        EngineArgs changes it under conditions kb reads (`if self.x is None and ...: self.x = ...` in
        __post_init__ or create_engine_config), unknown only when they hold; else known only when
        given if the code only fills it when unset, else unknown. `engine_field`: the guard reads
        EngineArgs' own field (only EngineArgs' code sets it); else the config's field too."""
        value = self.named("flag", flag.dest, flag.name)
        if flag.dest in self.filling:
            return value  # read by the condition it is changed under: the value before
        if self.computed(flag, engine_field):
            return self.named("computed", flag.dest, f"{flag.name} as vLLM computes it")
        config_how = None if engine_field else self.how_set(flag.config_class or "", flag.config_field or "")
        engine_how = self.how_set("EngineArgs", flag.dest)
        if config_how is None and engine_how is not None:
            changed = self.changed_when(flag)
            if changed is not None:
                unknown = self.named("unknown", f"{flag.name} as vLLM sets it", f"{flag.name}: vLLM's own code sets it")
                return ast.IfExp(changed, unknown, value)
        hows = {config_how, engine_how}
        if "set" in hows:
            raise _Unknown(f"{flag.name}: vLLM's own code sets it")
        if "default" in hows:
            return self.named("flag-given", flag.dest, flag.name)
        return value

    def computed(self, flag: Flag, engine_field: bool) -> bool:
        """vLLM sets the value before the site only where kb/checks/computed.py follows it (the
        functions of this release that it follows exactly)."""
        if flag.dest not in SET_IN or not modelled(self.model, flag.dest):
            return False
        if flag.config_class in self.fully_set or self.named_fill(flag.config_class or "", flag.config_field or ""):
            return False
        sets = [("EngineArgs", a) for a in self.effective("EngineArgs", flag.dest)]
        if not engine_field and flag.config_class and flag.config_field:
            sets += [(flag.config_class, a) for a in self.effective(flag.config_class, flag.config_field)]
        return bool(sets) and all((cls, method) in SET_IN[flag.dest] for cls, (_, method, _, _) in sets)

    def only_none_filled(self, cls: str, field_name: str) -> bool:
        """Nothing sets the field before the site but VllmConfig._set_config_default, which fills
        a field by name only when it is None."""
        return not self.effective(cls, field_name) and cls not in self.fully_set and \
            self.named_fill(cls, field_name) == "default"

    def named_fill(self, cls: str, field_name: str) -> Optional[str]:
        """How VllmConfig's code may set the field by name (`setattr(config_obj, key, value)`) before
        a site that runs once VllmConfig is built: "default", "set", or None when it does not (its
        by-name setters fill only the keys of the defaults tables they walk: kb.config.order.name_filled)."""
        if not self.late_site or "VllmConfig" not in self.anything_set:
            return None
        if self.by_name_setters and all(self.runs_after("VllmConfig", m, self.read_line or self.here[2])
                                        for m in self.by_name_setters.get("VllmConfig", {"?"})):
            return None  # its by-name setters run only after the site
        known = self.by_name.get("VllmConfig")
        if known is not None:
            key = cls.replace("_", "").lower()
            if not any((not holder and cls == "VllmConfig" and name == field_name) or
                       (holder and holder.replace("_", "").lower() == key and name == field_name)
                       for holder, name in known):
                return None
        return self.anything_set["VllmConfig"]

    def own_changed_when(self, cls: str, field_name: str) -> Optional[ast.expr]:
        """When a config's own __post_init__ changes one of its fields before the site (SchedulerConfig
        turns chunked prefill off `if is_encoder_decoder`): those conditions, read in __post_init__
        (its InitVars are what create_engine_config passes), joined by `or`; None when one is not
        read, or the change is elsewhere. Only for a site of that class: its file is the class's."""
        if self.here[0] != cls or cls in self.fully_set or self.named_fill(cls, field_name) or self.in_own:
            return None  # not inside another such condition: one level, so the check stays small
        conditions: list[ast.expr] = []
        scope = Scope(self.site_file, cls, "__post_init__")
        for _, method, _, when in self.effective(cls, field_name):
            if method != "__post_init__" or when in ("", "?"):
                return None
            saved = dict(self.refs)
            self.in_own = True
            try:
                conditions.append(self.term(when, scope, 1))
            except _Fail:
                self.refs = saved
                return None
            finally:
                self.in_own = False
        if not conditions:
            return None
        return conditions[0] if len(conditions) == 1 else ast.BoolOp(ast.Or(), conditions)

    def changed_when(self, flag: Flag) -> Optional[ast.expr]:
        """When EngineArgs' own code changes the field before the site: the conditions of its
        assignments (in create_engine_config or __post_init__, read in EngineArgs' scope; one that
        only fills an unset value also needs the flag not given), joined by `or`; None when one
        is not read."""
        conditions: list[ast.expr] = []
        for how, method, _, when in self.effective("EngineArgs", flag.dest):
            if when in ("", "?") or method not in ("create_engine_config", "__post_init__"):
                return None
            saved = dict(self.refs)
            self.filling.add(flag.dest)
            try:
                condition = self.term(when, _ENGINE_SCOPE, 1, engine=True)
            except _Fail:
                self.refs = saved
                return None
            finally:
                self.filling.discard(flag.dest)
            if how == "default":
                condition = ast.BoolOp(ast.And(), [ast.UnaryOp(ast.Not(), self.given(flag)), condition])
            conditions.append(condition)
        if not conditions:
            return None
        return conditions[0] if len(conditions) == 1 else ast.BoolOp(ast.Or(), conditions)

    def how_set(self, cls: str, field_name: str) -> Optional[str]:
        """"set" when vLLM's own code may change the field before the site raises, "default" when it only
        fills it when unset, None when it does not set it: an assignment later in the site's own
        function does not count."""
        if cls in self.fully_set and not self.runs_first(cls):
            return "set"
        hows = {how for how, _, _, _ in self.effective(cls, field_name)}
        by_name = self.named_fill(cls, field_name)  # VllmConfig sets fields by name first
        if by_name:
            hows.add(by_name)
        return "set" if "set" in hows else "default" if hows else None

    def runs_after(self, cls: str, method: str, line: int, assigned_at: int = 0) -> bool:
        """What `method` does (at `assigned_at`) runs after the site (at `line` of its own function):
        the config's __post_init__ first runs `method`, or runs that line of itself, after it runs the
        site, as kb.config.order.post_init_order reads it; False when not known."""
        _, function, _ = self.here
        at = line if function == "__post_init__" else self.post_init_order.get((cls, function))
        if at is None:
            return False
        if method == "__post_init__":
            return function != "__post_init__" and assigned_at > at
        first = self.post_init_order.get((cls, method))
        return first is not None and first > at

    def runs_first(self, cls: str) -> bool:
        """The site runs as the config is made, before any other class's code may touch it: a
        field validator of that config, or a check of a config vLLM's parser makes from a flag's JSON."""
        return self.validating == cls or (self.parsed_by is not None and self.parsed_by[1] == cls)

    def effective(self, cls: str, field_name: str) -> list[tuple[str, str, int, str]]:
        """The assignments of a field that may run before the site: not those later in its own
        function, nor, for a site that runs before VllmConfig is built, those of VllmConfig's own
        methods and of the config methods VllmConfig.__post_init__ calls."""
        owner, function, line = self.here
        line = self.read_line if self.read_line is not None else line
        out = []
        for a in self.assignments.get((cls, field_name), []):
            container, _, method = a[1].rpartition(".")  # "VllmConfig.__post_init__" for a field set through a holder
            container = container or cls
            if container == owner and method == function and a[2] > line:
                continue
            if self.validating and container == self.validating:
                continue  # the config's own code runs after its field validators
            if self.parsed_by is not None and container != self.parsed_by[1]:
                continue  # built by vLLM's parser from the flag's JSON: no other code has run yet
            if container == owner and self.runs_after(owner, method, line, a[2]):
                continue  # __post_init__ calls that method only after the site
            if not self.late_site and (container == "VllmConfig" or method in self.late_methods):
                continue
            out.append(a)
        return out

    def given(self, flag: Flag) -> ast.expr:
        """True when the command gives the flag."""
        return self.named("given", flag.dest, f"{flag.name} given")

    def config_object(self, parts: tuple[str, ...], depth: int) -> ast.expr:
        """A config object (`self.lora_config is not None`): True when vLLM builds it, else None."""
        key = parts[-1].replace("_", "").lower()  # exactly its class: a draft_model_config is not the ModelConfig
        cls = self.flag_rule.names.get(key) or next((c for c in self.parsed_into if c.replace("_", "").lower() == key), None)
        if cls is None:
            raise _Unknown(f"{'.'.join(parts)}: a config kb does not know")
        build = self.builds.get(cls)
        if build is not None and build.when != "?":
            if not build.when:
                return ast.Constant(True)
            return ast.IfExp(self.term(build.when, _ENGINE_SCOPE, depth + 1, engine=True), ast.Constant(True),
                             ast.Constant(None))
        flag = self.parsed_into.get(cls)
        if flag is not None and flag.default is None and flag.default_exact:
            return ast.IfExp(self.given(flag), ast.Constant(True), ast.Constant(None))
        if flag is not None and isinstance(flag.default, str) and flag.default.startswith(cls + "("):
            return ast.Constant(True)  # its default is an instance: always built
        raise _Unknown(f"{'.'.join(parts)}: when vLLM builds {cls} is not read by kb")

    def internal_field(self, i: Input, parts: tuple[str, ...], depth: int) -> ast.expr:
        """A field no flag sets (`ModelConfig.is_submodel_config`): what create_engine_config passes
        for it, else its class's default, when vLLM's own code never sets it."""
        cls, _, name = i.key.partition(".")
        if "." in name or not name or parts[-1] != name:  # `self.prefetch.offload_group_size`: not `prefetch`
            raise _Unknown(f"{i.read[:80]}: internal ({i.via[:80]})")
        build = self.builds.get(cls)
        if self.how_set(cls, name) is not None:
            flag = next((f for f in self.model.flags if (f.config_class, f.config_field) == (cls, name)), None)
            if flag is not None and self.computed(flag, engine_field=False):
                return self.named("computed", flag.dest, f"{flag.name} as vLLM computes it")
            value = self.class_defaults.get((cls, name), _MISSING)
            if not (self.only_none_filled(cls, name) and (build is None or name not in dict(build.args))
                    and isinstance(value, (str, int, float, bool))):
                raise _Unknown(f"{i.key}: vLLM's own code sets it")
            return ast.Constant(value)  # VllmConfig fills by name only what is None: its default stays
        source = dict(build.args).get(name) if build is not None else None
        if source is not None:
            return self.term(source, _ENGINE_SCOPE, depth + 1, engine=True)
        if build is not None and build.spread:
            raise _Unknown(f"{i.key}: create_engine_config may pass it in **kwargs")
        value = self.class_defaults.get((cls, name), _MISSING)
        if not (value is None or isinstance(value, (str, int, float, bool))):
            raise _Unknown(f"{i.read[:80]}: internal ({i.via[:80]})")
        return ast.Constant(value)

    def built_field(self, flag: Flag, depth: int) -> ast.expr:
        """The field as create_engine_config builds its config: what the call passes for it."""
        assert flag.config_class is not None
        build = self.builds[flag.config_class]
        source = dict(build.args).get(flag.config_field or "")
        if self.computed(flag, engine_field=False):
            return self.named("computed", flag.dest, f"{flag.name} as vLLM computes it")
        how = self.how_set(flag.config_class, flag.config_field or "")
        if how == "set":
            own = self.own_changed_when(flag.config_class, flag.config_field or "")
            if own is None or source is None:
                raise _Unknown(f"{flag.config_class}.{flag.config_field}: vLLM's own code sets it")
            changed = self.named("unknown", f"{flag.config_class}.{flag.config_field} as vLLM sets it",
                                 f"{flag.config_class}.{flag.config_field}: vLLM's own code sets it")
            return ast.IfExp(own, changed, self.term(source, _ENGINE_SCOPE, depth + 1, engine=True))
        if how == "default":
            if source is not None and source != f"self.{flag.dest}":
                raise _Unknown(f"{flag.config_class}.{flag.config_field}: built from `{source[:60]}` and set again by "
                               "vLLM's own code")
            return self.named("flag-given", flag.dest, flag.name)  # its value is known only when given
        if source is None:
            if build.spread:
                return self.flag(flag)
            raise _Unknown(f"{flag.config_class}.{flag.config_field}: not passed by create_engine_config, so "
                        f"{flag.name} does not set it there")
        return self.term(source, _ENGINE_SCOPE, depth + 1, engine=True)

    def named(self, kind: str, key: str, shown: str) -> ast.Name:
        ref = self.refs.get((kind, key))
        if ref is None:
            ref = Ref(f"_v{len(self.refs)}", kind, key, shown)
            self.refs[(kind, key)] = ref
        return ast.Name(ref.name, ast.Load())

    def message(self, site: RaiseSite, scope: Scope) -> tuple[tuple[str, str], ...]:
        out: list[tuple[str, str]] = []
        for expr in placeholders(site.template)[:16]:
            saved = dict(self.refs)
            try:
                node = ast.fix_missing_locations(self.term(expr, scope, 0))
                check_whitelist(node, derived=True)
                out.append((expr, ast.unparse(node)))
            except (_Fail, ExprError, RecursionError, ValueError):
                self.refs = saved
        return tuple(out)


def _canonical(text: str) -> str:
    """A condition's source as ast.unparse writes it (the scan and kb.config.flow may differ)."""
    node = _parse(text)
    if node is None:
        return text
    try:
        return ast.unparse(node)
    except (ValueError, RecursionError):
        return text


def _reads(node: ast.expr, names: frozenset[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def _callable(n: ast.Call) -> bool:
    """A call the derived evaluator makes: a function of DERIVED_FUNCTIONS, a method of METHODS."""
    if isinstance(n.func, ast.Name):
        return n.func.id in DERIVED_FUNCTIONS and not n.keywords
    return isinstance(n.func, ast.Attribute) and n.func.attr in _METHODS and not n.keywords


def _short(text: str) -> str:
    return shorten(text, 80)


_LOOPS = frozenset({"while", "for-else", "while-else", "case"})


def _all(conditions: list[ast.expr]) -> ast.expr:
    if not conditions:
        return ast.Constant(True)
    return conditions[0] if len(conditions) == 1 else ast.BoolOp(ast.And(), conditions)


_METHODS = ALL_METHODS  # the methods the derived evaluator calls (kb/checks/evaluate.py)


def derive(sites: Sequence[RaiseSite], model: Optional[ConfigModel]) -> DerivedIndex:
    """The derived checks of the config-time sites (LAUNCH_FILES), in site order."""
    if model is None:
        return DerivedIndex((), ())
    compiler = _Compiler(model)
    checks: list[Derived] = []
    uncheckable: list[Uncheckable] = []
    for s in sorted(sites, key=lambda s: (s.file, s.line, s.id)):
        if not s.file.startswith(LAUNCH_FILES) and s.file != REQUEST_FILE:
            continue
        out = compiler.site(s)
        (checks if isinstance(out, Derived) else uncheckable).append(out)  # type: ignore[arg-type]
    return DerivedIndex(tuple(checks), tuple(uncheckable), compiler.passed())


# --- running them -------------------------------------------------------------------------------
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
