"""The condition an error is raised under, over what users set: a Python expression whose names
are `Label`s (kb/derived/words.py), ready to be put in words.

Two readings, both from the scan and the flag model, nothing run:
- `guard_condition`: the guard of the raise, each reference resolved as "What sets this" resolves
  it (kb/config/resolve.py) and each local the guard reads replaced by what it was assigned;
- `check_condition`: the check kb derives from vLLM's guard (kb/checks/derive.py): vLLM's whole
  condition over launch values (the configs built, the values vLLM computes first), simplified.
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from kb.checks.compiled import Derived
from kb.checks.evaluate import ALL_METHODS
from kb.checks.facts import constants_of
from kb.config.references import BUILTINS, attribute_chain, named_attribute, parse_term
from kb.config.resolve import SetByReader
from kb.config.rules import ARCH_KEYS, Scope
from kb.configmodel import ConfigModel, Flag
from kb.derived import words as w
from kb.derived.simplify import simplify
from kb.model import RaiseSite
from kb.setby import CHECKPOINT, CONFIG_JSON, ENV, FLAG, HARDWARE, REQUEST_FIELD

MAX_LOCAL_DEPTH = 4  # locals followed through locals
USER_KINDS = frozenset({w.FLAG, w.FLAG_KEY, w.GIVEN, w.CONFIG_JSON, w.ENV, w.REQUEST})


@dataclass(frozen=True)
class Condition:
    """A condition over labelled names (`_kb0`, ...)."""

    node: ast.expr
    labels: dict[str, w.Label]

    @property
    def user_labels(self) -> list[w.Label]:
        """The labels the condition still reads that users set, in order of appearance."""
        seen: dict[str, w.Label] = {}
        for n in ast.walk(self.node):
            if isinstance(n, ast.Name) and n.id in self.labels and self.labels[n.id].kind in USER_KINDS:
                seen.setdefault(n.id, self.labels[n.id])
        return list(seen.values())


def flag_label(flag: Flag, kind: str = w.FLAG) -> w.Label:
    switch = flag.action in ("store_true", "store_false", "boolean") or flag.type == "bool"
    return w.Label(flag.name, kind, switch=switch, optional=flag.default is None and flag.default_exact)


# --- the guard, resolved ---------------------------------------------------------------------------
class _Labeller(ast.NodeTransformer):
    def __init__(self, reader: SetByReader, model: Optional[ConfigModel], scope: Scope,
                 conditional: frozenset[str], labels: dict[str, w.Label], depth: int = 0) -> None:
        self.reader, self.model, self.scope = reader, model, scope
        self.conditional, self.labels, self.depth = conditional, labels, depth
        self.bound: set[str] = set()

    def label(self, label: w.Label) -> ast.Name:
        for name, known in self.labels.items():
            if known == label:
                return ast.Name(name, ast.Load())
        name = f"_kb{len(self.labels)}"
        self.labels[name] = label
        return ast.Name(name, ast.Load())

    def visit(self, node: ast.AST) -> Any:
        if isinstance(node, (ast.GeneratorExp, ast.ListComp, ast.SetComp)):
            for gen in node.generators:
                self.bound |= {t.id for t in ast.walk(gen.target) if isinstance(t, ast.Name)}
            return self.generic_visit(node)
        if isinstance(node, ast.NamedExpr):
            return self.visit(node.value)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                (node.args or node.keywords or node.func.attr in ALL_METHODS):
            # a method of a value (`backend.startswith("x")`, `ops.count("all")`): the value is read
            node.func.value = self.visit(node.func.value)
            node.args = [self.visit(a) for a in node.args]
            node.keywords = [self.visit(k) for k in node.keywords]
            return node
        if isinstance(node, (ast.Attribute, ast.Name, ast.Call)):
            parts = named_attribute(node) or attribute_chain(node)
            if parts is not None and parts[0] not in self.bound and not (len(parts) == 1 and parts[0] in BUILTINS):
                found = self.reference(node, parts)
                if found is not None:
                    return found
                if not isinstance(node, ast.Call):
                    return node
        return self.generic_visit(node)

    def reference(self, node: ast.expr, parts: tuple[str, ...]) -> Optional[ast.expr]:
        head = parts[0]
        if len(parts) == 1 and head in self.scope.locals and head not in self.conditional and \
                self.depth < MAX_LOCAL_DEPTH:
            source = re.sub(r"^copy\.(?:deep)?copy\((.*)\)$", r"\1", self.scope.locals[head])
            parsed = parse_term(source)
            if parsed is None or any(isinstance(n, ast.Name) and n.id == head for n in ast.walk(parsed)) or \
                    _empty_container(parsed):
                return None  # `x = x or 1`: the x it reads is an earlier one; `x = []`: filled later
            inner = _Labeller(self.reader, self.model, self.scope, self.conditional, self.labels, self.depth + 1)
            return inner.visit(copy.deepcopy(parsed))  # type: ignore[no-any-return]
        text = ast.unparse(node) if isinstance(node, ast.Call) else ".".join(parts)
        found = self.reader.resolver.resolve(parts, text, self.scope, self.depth)
        validated = len(parts) == 1 and head in self.scope.validated and bool(self.scope.validated[head])
        if len(found) != 1 or "matched by name" in found[0].via or not (
                validated or _names_exactly(parts, found[0].kind, found[0].key, self.model)):
            return None
        label = self.input_label(found[0].kind, found[0].key, found[0].via)
        if label is None:
            return None
        name = self.label(label)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "hasattr":
            return ast.Compare(name, [ast.IsNot()], [ast.Constant(None)])  # it has the key: it is given
        return name

    def input_label(self, kind: str, key: str, via: str) -> Optional[w.Label]:
        if kind == FLAG:
            if "computes" in via or "keys given to" in via or "builds the config" in via:
                return None
            name, dot, sub = key.partition(".")
            flag = self.model.flag(name) if self.model is not None else None
            if dot:
                return w.Label(sub, w.FLAG_KEY, parent=name)
            return flag_label(flag) if flag is not None else w.Label(key, w.FLAG)
        if kind == CONFIG_JSON and key != "config.json":
            return w.Label(key, w.CONFIG_JSON)
        if kind == ENV and key != "the environment":
            return w.Label(key, w.ENV)
        if kind == REQUEST_FIELD:
            return w.Label(key, w.REQUEST)
        if kind == CHECKPOINT:
            return w.Label(key.rpartition(".")[2].removesuffix("()"), w.CHECKPOINT)
        if kind == HARDWARE:
            m = re.fullmatch(r"current_platform\.(is_\w+)\(\)", key)
            return w.Label(m.group(1), w.PLATFORM) if m else None
        return None


def _empty_container(node: ast.expr) -> bool:
    if isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
        return not (node.keys if isinstance(node, ast.Dict) else node.elts)
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
        "set", "list", "dict", "tuple") and not node.args and not node.keywords


def _names_exactly(parts: tuple[str, ...], kind: str, key: str, model: Optional[ConfigModel]) -> bool:
    """Whether the input is the value the reference reads itself, not a value it reads a part of
    (`self.parallel_config.x.y` resolves to the flag of `x`: it is not that flag's value)."""
    last = parts[-1].removesuffix("()")
    if kind == FLAG:
        name, dot, sub = key.partition(".")
        if dot:
            return sub == last
        flag = model.flag(name) if model is not None else None
        return flag is not None and last in (flag.dest, flag.config_field)
    if kind == CONFIG_JSON:
        return last == key or ARCH_KEYS.get(last) == key
    if kind in (REQUEST_FIELD, ENV):
        return last == key or parts[0] == "os"
    if kind == CHECKPOINT:
        return key.rpartition(".")[2].removesuffix("()") == last
    return kind == HARDWARE


def guard_condition(site: RaiseSite, reader: SetByReader, model: Optional[ConfigModel]) -> Optional[Condition]:
    """The raise's guard (its enclosing conditions, outermost first), resolved; None without one."""
    terms = [parse_term(t) for t in site.fact.guard_terms]
    if not terms or any(t is None for t in terms):
        return None
    scope = reader.scope(site)
    conditional = frozenset(d.name for d in site.fact.locals if d.conditional)
    labels: dict[str, w.Label] = {}
    labeller = _Labeller(reader, model, scope, conditional, labels)
    nodes = [labeller.visit(copy.deepcopy(t)) for t in terms if t is not None]
    node = nodes[0] if len(nodes) == 1 else ast.BoolOp(ast.And(), nodes)
    return Condition(simplify(node, {}), labels)


# --- the derived check -----------------------------------------------------------------------------
def check_condition(check: Derived, model: ConfigModel) -> Condition:
    """The derived check's condition, its values named as users name them; vLLM's own constants
    (a tuple of backends) written out."""
    by_dest = {f.dest: f for f in model.flags}
    labels: dict[str, w.Label] = {}
    constants = constants_of(check)
    for r in check.refs:
        if r.kind == "value" and r.name not in constants:  # a constant kb cannot decode: as vLLM names it
            labels[r.name] = w.Label(r.shown.split(" (")[0], w.OTHER)
        elif r.kind != "value":
            labels[r.name] = _ref_label(r.kind, r.key, r.shown, by_dest)
    hashable = {k: v for k, v in constants.items() if _plain(v)}
    node = ast.parse(check.expr, mode="eval").body
    for name in set(constants) - set(hashable):
        labels[name] = w.Label(name, w.OTHER)
    return Condition(simplify(node, hashable), labels)


def _plain(value: Any) -> bool:
    if isinstance(value, (tuple, frozenset, list)):
        return all(isinstance(v, (str, int, float, bool, type(None))) for v in value)
    return isinstance(value, (str, int, float, bool, type(None)))


def _ref_label(kind: str, key: str, shown: str, by_dest: Mapping[str, Flag]) -> w.Label:
    if kind in ("flag", "flag-given"):
        flag = by_dest.get(key)
        return flag_label(flag) if flag is not None else w.Label(shown, w.FLAG)
    if kind in ("flag-key", "flag-key-given"):
        dest, _, sub = key.partition(".")
        flag = by_dest.get(dest)
        return w.Label(sub, w.FLAG_KEY, parent=flag.name if flag is not None else dest)
    if kind == "given":
        flag = by_dest.get(key)
        return w.Label(flag.name if flag is not None else shown, w.GIVEN)
    if kind == "config-json":
        return w.Label(key, w.CONFIG_JSON)
    if kind == "env":
        return w.Label(key, w.ENV)
    if kind == "platform":
        return w.Label(key, w.PLATFORM)
    if kind == "computed":
        return w.Label(key, w.COMPUTED)
    if kind == "request":
        return w.Label(key, w.REQUEST)
    return w.Label(key.removeprefix("self."), w.OTHER)  # what kb cannot know before launch: as vLLM names it
