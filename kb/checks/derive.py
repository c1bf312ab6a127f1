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
only for the keys of the tables they walk (kb.config.byname). The condition holds three-valued: an
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
import dataclasses
from collections.abc import Sequence
from typing import Optional

from kb.checks.compiled import Derived, DerivedIndex, Uncheckable
from kb.checks.compiling import (
    ENGINE_FILE,
    ENGINE_SCOPE,
    LOOP_CONTEXTS,
    VLLM_SCOPE,
    NotCheckable,
    canonical,
    conjunction,
    reads_any,
)
from kb.checks.effective import Effective
from kb.checks.evaluate import check_whitelist
from kb.checks.order import REQUEST_FILE
from kb.config.order import REQUEST_CLASS
from kb.config.resolve import scope_of
from kb.config.rules import Scope
from kb.configmodel import ConfigModel
from kb.errors import ExprError
from kb.model import REACH_UNKNOWN, Caller, RaiseSite
from kb.scan.messages import placeholders

LAUNCH_FILES = ("vllm/config/", "vllm/engine/arg_utils.py")
# the request model: each request's sampling parameters are checked as it is made (`__post_init__`)
# and when the engine takes the request (`verify`, with the model's config): its fields are `request` refs
REQUEST_ENTRIES = ("__post_init__", "verify")  # the methods of REQUEST_CLASS (in REQUEST_FILE) run for every request
MAX_REFS = 32  # values one check reads


class _Compiler(Effective):
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
                raise NotCheckable("no condition: raised whenever its function runs, which kb does not follow")
            scope = scope_of(site)
            self.alive = [scope]
            self.conditional = {id(scope): frozenset(d.name for d in site.fact.locals if d.conditional)}
            terms = self.when_built(site, scope)
            inside = self.loops(site, scope)
            if REACH_UNKNOWN in site.fact.exits:
                raise NotCheckable("raised inside a `try`, a `while` or a `match`, or after an exit kb does not read")
            body = [self.exit_term(t, scope, None if in_loop else
                                   self.exit_lines.get((site.file, site.fact.qualname, canonical(t))))
                    for t in site.fact.exits]
            body += [self.term(t, scope, 0) for t in site.fact.guard_terms]
            loop_names = self.bound
            self.bound = frozenset()
            if inside:  # raised in a loop: vLLM's condition for any of its items; what reads no item, outside
                outside = [t for t in body if not reads_any(t, loop_names)]
                per_item = [t for t in body if reads_any(t, loop_names)]
                terms += outside
                terms.append(ast.Call(ast.Name("any", ast.Load()), [ast.GeneratorExp(conjunction(per_item), inside)], []))
            else:
                terms += body
            node: ast.expr = ast.BoolOp(ast.And(), terms) if len(terms) > 1 else terms[0]
            node = ast.fix_missing_locations(node)
            check_whitelist(node, derived=True)
            expr = ast.unparse(node)
            if len(self.refs) > MAX_REFS:
                raise NotCheckable(f"reads more than {MAX_REFS} values")
            guard_refs = dict(self.refs)
            message = self.message(site, scope)
            extra = {k: v for k, v in self.refs.items() if k not in guard_refs}
        except NotCheckable as e:
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
                raise NotCheckable(f"raised inside the loop `{c.source[:60]}`, which kb does not read")
            collection = self.term(ast.unparse(loop.iter), scope, 0)
            self.bound = self.bound | {t.id for t in ast.walk(loop.target) if isinstance(t, ast.Name)}
            out.append(ast.comprehension(loop.target, collection, [], 0))
        return out

    def when_built(self, site: RaiseSite, scope: Scope) -> list[ast.expr]:
        """The condition its function runs under, as far as kb reads it: a config's validators and
        `__post_init__` run when create_engine_config builds it; another function runs where its
        callers in the same file call it (their conditions, and theirs in turn)."""
        if any(c.kind in LOOP_CONTEXTS for c in site.fact.contexts):
            raise NotCheckable("raised inside a `while` loop, a loop's `else` or a `match`: kb does not follow it")
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
            raise NotCheckable(f"raised in {qualname}{where}: kb does not follow it to a config built at launch")
        alternatives: list[ast.expr] = []
        for c in callers:
            if REACH_UNKNOWN in c.guard:
                raise NotCheckable(f"{qualname} is called by {c.qualname} (line {c.line}) in a loop, a `try`, a `with` "
                            "or a `match`")
            inner = self.caller_scope(scope, c)
            conditions = [self.term(g, inner, depth + 1) for g in c.guard]
            conditions = self.runs_when(c.qualname, None, file, c.callers, inner, depth + 1) + conditions
            alternatives.append(conjunction(conditions))
        return [alternatives[0] if len(alternatives) == 1 else ast.BoolOp(ast.Or(), alternatives)]

    def called_by_vllm_config(self, owner: str, method: str, depth: int) -> Optional[list[ast.expr]]:
        """Where VllmConfig.__post_init__ calls a config's method (`self.model_config.verify_with_parallel_config`):
        VllmConfig is always built, so the call's own conditions; None when it does not."""
        key = owner.replace("_", "").lower()
        for attribute, called, condition in self.model.config_calls:
            if called != method or self.flag_rule.owner_key(attribute) != key:
                continue
            if condition == "?":
                raise NotCheckable(f"{owner}.{method} is called by VllmConfig in a loop, a `try`, a `with` or a `match`")
            self.late_site = True
            return [self.term(condition, VLLM_SCOPE, depth + 1)] if condition else []
        return None

    def built(self, owner: str) -> list[ast.expr]:
        build = self.builds.get(owner)
        if build is None and owner in self.parsed_into:
            self.parsed_by = (self.parsed_into[owner], owner)
            return [self.given(self.parsed_into[owner])]  # kb knows its fields only from the JSON given
        if build is None:
            raise NotCheckable(f"{owner} is not built by create_engine_config as kb reads it")
        if build.when == "?":
            raise NotCheckable(f"{owner} is built in a loop, a `try` or a `with` of create_engine_config")
        return [self.term(build.when, ENGINE_SCOPE, 0, engine=True)] if build.when else []

    # --- terms ---------------------------------------------------------------------------------

    def message(self, site: RaiseSite, scope: Scope) -> tuple[tuple[str, str], ...]:
        out: list[tuple[str, str]] = []
        for expr in placeholders(site.template)[:16]:
            saved = dict(self.refs)
            try:
                node = ast.fix_missing_locations(self.term(expr, scope, 0))
                check_whitelist(node, derived=True)
                out.append((expr, ast.unparse(node)))
            except (NotCheckable, ExprError, RecursionError, ValueError):
                self.refs = saved
        return tuple(out)


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
