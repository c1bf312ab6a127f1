"""What compiling vLLM's guards into checks (kb/checks/derive.py) keeps while it runs: the flag
model's tables, the site being compiled, the values its check reads so far (`named`); the
failures that make a site uncheckable, and the small helpers the compiling parts share."""

from __future__ import annotations

import ast
from typing import Optional

from kb.checks.compiled import Ref
from kb.checks.evaluate import ALL_METHODS, DERIVED_FUNCTIONS, shorten
from kb.config.references import parse_term
from kb.config.resolve import SetByReader
from kb.config.rules import FlagRule, Scope
from kb.configmodel import Build, ConfigModel, Flag
from kb.model import LocalDef

ENGINE_FILE = "vllm/engine/arg_utils.py"


class NotCheckable(Exception):
    """The site is not checkable: why."""


class UnknownValue(NotCheckable):
    """A value kb cannot give before launch: the check reads it as an unknown input, which
    makes it unknown only when vLLM's condition needs it (`a is not None and a.x()`)."""


ENGINE_SCOPE = Scope(ENGINE_FILE, "EngineArgs", "create_engine_config")
VLLM_SCOPE = Scope("vllm/config/vllm.py", "VllmConfig", "__post_init__")


class CompilerBase:
    """The state of one compiling run: the model's tables, and the site being compiled."""

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
        self.exit_lines = {(f, q, canonical(text)): line for f, q, line, text in model.exits}
        self.chains = {(f, q, name): (first, last, e) for f, q, name, first, last, e in model.chains}
        self.site_locals: dict[str, LocalDef] = {}
        self.site_function = ""
        # the line the value compiled is read at, in the site's own function (an early exit's test, a
        # local's assignment): that function's assignments after it do not count (effective)
        self.read_line: Optional[int] = None
        # (class as FlagRule keys it, member) -> (file, class, expression): properties and small methods
        self.members = {(c.replace("_", "").lower(), m): (f, c, e) for f, c, m, e in model.members}

    def named(self, kind: str, key: str, shown: str) -> ast.Name:
        ref = self.refs.get((kind, key))
        if ref is None:
            ref = Ref(f"_v{len(self.refs)}", kind, key, shown)
            self.refs[(kind, key)] = ref
        return ast.Name(ref.name, ast.Load())


def canonical(text: str) -> str:
    """A condition's source as ast.unparse writes it (the scan and kb.config.flow may differ)."""
    node = parse_term(text)
    if node is None:
        return text
    try:
        return ast.unparse(node)
    except (ValueError, RecursionError):
        return text


def reads_any(node: ast.expr, names: frozenset[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def evaluator_call(n: ast.Call) -> bool:
    """A call the derived evaluator makes: a function of DERIVED_FUNCTIONS, a method of METHODS."""
    if isinstance(n.func, ast.Name):
        return n.func.id in DERIVED_FUNCTIONS and not n.keywords
    return isinstance(n.func, ast.Attribute) and n.func.attr in METHODS and not n.keywords


def short(text: str) -> str:
    return shorten(text, 80)


LOOP_CONTEXTS = frozenset({"while", "for-else", "while-else", "case"})


def conjunction(conditions: list[ast.expr]) -> ast.expr:
    if not conditions:
        return ast.Constant(True)
    return conditions[0] if len(conditions) == 1 else ast.BoolOp(ast.And(), conditions)


METHODS = ALL_METHODS  # the methods the derived evaluator calls (kb/checks/evaluate.py)
