"""Each name a guard reads, to the expression the check reads it by: locals and callers'
arguments substituted, loops and comprehensions kept, a config's member by what it computes, a
module-level value of vLLM's source by its value, everything else a named value (`Ref`)."""

from __future__ import annotations

import ast
import copy
import json
import re
from collections.abc import Callable
from typing import Any, Optional

from kb.checks.compiled import Passed
from kb.checks.compiling import (
    ENGINE_SCOPE,
    METHODS,
    CompilerBase,
    NotCheckable,
    UnknownValue,
    evaluator_call,
    short,
)
from kb.checks.computed import COMPUTED_PROPERTIES, modelled
from kb.checks.evaluate import MATH_FUNCTIONS, check_whitelist
from kb.config.references import BUILTINS, attribute_chain, named_attribute, parse_term
from kb.config.rules import Scope
from kb.errors import ExprError
from kb.model import Caller
from kb.setby import CHECKPOINT, INTERNAL, UNRESOLVED, Input

MAX_DEPTH = 8  # locals, callers and build arguments followed one through another


class References(CompilerBase):
    def term(self, text: str, scope: Scope, depth: int, engine: bool = False) -> ast.expr:
        if depth > MAX_DEPTH:
            raise NotCheckable("locals followed too deep")
        node = parse_term(text)
        if node is None:
            raise NotCheckable(f"not parsed: {text[:80]}")
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
                if isinstance(n, ast.Call) and not evaluator_call(n):  # getattr(<a local>, "x"), issubclass(...)
                    text = short(ast.unparse(n))
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
                    value = ast.fix_missing_locations(self.term(source, ENGINE_SCOPE, 0, engine=True))
                    when = ast.fix_missing_locations(self.term(b.when, ENGINE_SCOPE, 0, engine=True)) if b.when else None
                    for node in (value, when):
                        if node is not None:
                            check_whitelist(node, derived=True)
                except (NotCheckable, ExprError, RecursionError, ValueError):
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
        parts = attribute_chain(n)
        if parts is not None and parts[0] in self.bound:
            return None  # `item.x` of a loop's item: left as written (the evaluator reads no attribute)
        saved = dict(self.refs)
        try:
            return self._reference(n, scope, depth, engine)
        except UnknownValue as e:
            self.refs = saved
            text = short(ast.unparse(n))
            return self.named("unknown", text, f"{text}: {e}")

    def _reference(self, n: ast.expr, scope: Scope, depth: int, engine: bool) -> Optional[ast.expr]:
        named = self.module_name(n, scope)
        if named is not None:
            return named
        parts = named_attribute(n) or attribute_chain(n)
        if parts is None or (len(parts) == 1 and parts[0] in BUILTINS):
            return None
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in BUILTINS:
            return None
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in METHODS and \
                attribute_chain(n.func.value) is None:
            return None  # a method of a value computed in the guard: `x.lower()` of `(a or b)`
        head = parts[0]
        if len(parts) == 2 and parts[1] in COMPUTED_PROPERTIES and modelled(self.model, parts[1]) and (
                (head == "self" and scope.owner == "ModelConfig") or
                (engine and self.engine_configs.get(head) == "ModelConfig" and head not in scope.locals)):
            return self.named("computed", parts[1], f"{parts[1]} as vLLM computes it")
        if engine and head in self.engine_configs and head not in scope.locals:
            return self._reference(n, scope, depth, False)  # `model_config.x`: the field of the config it built
        if engine and head != "self" and not (len(parts) == 1 and head in scope.locals):
            raise UnknownValue(f"{'.'.join(parts)[:80]}: a local of create_engine_config, not followed")
        if head in scope.locals and not (len(parts) > 1 and head.endswith("_config")):
            own = scope is self.alive[0] and head in self.site_locals  # a local of the site's own function
            chain = self.chains.get((scope.file, self.site_function, head)) if own else None
            at = self.site_locals[head].line if own else None
            if chain is not None and at is not None and chain[0] <= at <= chain[1]:
                # assigned along an if/elif chain: one conditional expression, read where the chain is
                value = self.read_at(chain[1], lambda: self.term(chain[2], scope, depth + 1, engine))
                return self.tail(value, parts[1:], n, scope, depth, engine)
            if head in self.conditional.get(id(scope), frozenset()):
                raise UnknownValue(f"{head}: assigned in a block that does not enclose the raise, so it may hold "
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
                raise UnknownValue(f"the parameter {head}: {len(scope.callers)} calls pass it")
            c = scope.callers[0]
            arg = next((a for a in c.args if a.param == head), None)
            if arg is None:
                raise UnknownValue(f"the parameter {head}: passed through *args or **kwargs")
            caller = self.caller_scope(scope, c)
            return self.tail(self.term(arg.source, caller, depth + 1, engine), parts[1:], n, caller, depth, engine)
        build = self.builds.get(scope.owner) if scope.function == "__post_init__" and not scope.callers else None
        if build is not None and len(parts) == 1 and head in dict(build.args) and head not in scope.locals:
            # an InitVar of a config's __post_init__ (`max_model_len`): what create_engine_config passes
            return self.term(dict(build.args)[head], ENGINE_SCOPE, depth + 1, engine=True)
        text = ast.unparse(n) if isinstance(n, ast.Call) else ".".join(parts)
        found = self.reader.resolver.resolve(parts, text, scope, depth)
        if len(found) != 1 or found[0].kind in (INTERNAL, CHECKPOINT, UNRESOLVED):
            computed = self.member(parts, n, scope, depth)
            if computed is not None:
                return computed
        if len(found) != 1:
            raise UnknownValue(f"{text[:80]}: not resolved to one input")
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
        except NotCheckable as e:
            raise UnknownValue(f"{cls}.{rest[0]}: {e}") from None

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
        if len(rest) == 1 and rest[0].endswith("()") and rest[0][:-2] in METHODS and isinstance(n, ast.Call):
            args = [self.swap(copy.deepcopy(a), scope, depth, engine) for a in n.args]
            return ast.Call(ast.Attribute(value, rest[0][:-2], ast.Load()), args, [])
        raise UnknownValue(f"{'.'.join(rest)} of a local: not followed")

    def ref_of(self, i: Input, parts: tuple[str, ...], n: ast.expr, depth: int, engine: bool) -> ast.expr:
        """The expression for a resolved input (kb/checks/effective.py)."""
        raise NotImplementedError
