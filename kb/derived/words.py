"""A condition of vLLM's source in words: `--decode-context-parallel-size > 1 and ...` read as
"`--decode-context-parallel-size` is greater than 1 and ...".

The condition comes as a Python expression whose names stand for what users set (`Label`: a flag, a
config.json key, an environment variable, a request field, ...). What has no words of its own (an
arithmetic formula, a call kb does not know) is quoted as code, with users' names in it. Pure
functions; the output is Markdown (code spans), one line.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from kb.records.present import code_span

MAX_ITEMS = 8  # values of a collection written out ("one of a, b, ... ")
MAX_CODE = 160  # characters of a formula quoted as code; longer ones make the condition unreadable

# what a label reads as, by its kind
FLAG, FLAG_KEY, GIVEN, CONFIG_JSON, ENV, REQUEST, CHECKPOINT, PLATFORM, COMPUTED, OTHER = (
    "flag", "flag-key", "given", "config-json", "env", "request-field", "checkpoint", "platform", "computed", "other")
# vLLM's platform checks, as the platform they ask for
PLATFORMS = {"is_cuda": "an NVIDIA GPU (CUDA)", "is_rocm": "an AMD GPU (ROCm)", "is_tpu": "a TPU",
             "is_xpu": "an Intel GPU (XPU)", "is_cpu": "the CPU", "is_cuda_alike": "a CUDA or ROCm GPU",
             "is_out_of_tree": "an out-of-tree platform plugin"}


class TooComplex(Exception):
    """The condition has no readable words (a formula longer than MAX_CODE, a shape kb does not read)."""


@dataclass(frozen=True)
class Label:
    """What a name of the condition stands for, as users know it."""

    text: str  # --tensor-parallel-size, num_attention_heads, VLLM_USE_V1, temperature, is_rocm
    kind: str
    switch: bool = False  # a boolean flag or key: "is on" / "is off"
    optional: bool = False  # not given means None: `is None` reads "is not given"
    parent: str = ""  # the JSON-valued flag of a key (`--speculative-config`)

    @property
    def plain(self) -> str:
        """As it is written inside a formula."""
        if self.kind == FLAG_KEY and self.parent:
            return f"{self.parent}.{self.text}"
        return self.text

    @property
    def noun(self) -> str:
        t = code_span(self.text)
        if self.kind == FLAG_KEY and self.parent:
            return f"{t} in {code_span(self.parent)}"
        if self.kind == CONFIG_JSON:
            return f"{t} in config.json"
        if self.kind == ENV:
            return f"the environment variable {t}"
        if self.kind == REQUEST:
            return f"the request's {t}"
        if self.kind == CHECKPOINT:
            return f"the model's {t}"
        if self.kind == COMPUTED:
            return f"{t} (as vLLM computes it)"
        return t

    def given(self, yes: bool) -> str:
        if self.kind == CONFIG_JSON:
            return f"config.json {'sets' if yes else 'does not set'} {code_span(self.text)}"
        if self.kind in (FLAG, FLAG_KEY, GIVEN, ENV, REQUEST):
            return f"{self.noun} is {'given' if yes else 'not given'}"
        return f"{self.noun} is {'not None' if yes else 'None'}"


@dataclass(frozen=True)
class _Part:
    text: str
    level: int  # 0: an `or` of clauses, 1: an `and` of them, 2: one clause


_NEGATED: dict[type, type] = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE,
                              ast.LtE: ast.Gt, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot,
                              ast.IsNot: ast.Is}
_ORDER = {ast.Lt: "less than", ast.LtE: "at most", ast.Gt: "greater than", ast.GtE: "at least"}


class Words:
    """Renders conditions over `labels` (name -> Label); names without one are quoted as code."""

    def __init__(self, labels: Mapping[str, Label]) -> None:
        self.labels = labels
        self.spoken: set[str] = set()  # the labels the words name as such (not inside quoted code)

    def condition(self, node: ast.expr) -> str:
        """The condition in words; TooComplex when it has none."""
        return self._truth(node, True).text

    # --- clauses ---------------------------------------------------------------------------------
    def _truth(self, n: ast.expr, yes: bool) -> _Part:
        """A clause that holds when `n` is truthy (`yes`) or falsy (not `yes`)."""
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            return self._truth(n.operand, not yes)
        if isinstance(n, ast.BoolOp):
            both = isinstance(n.op, ast.And) == yes  # `and` holding, or `or` failing (De Morgan)
            parts = [self._truth(v, yes) for v in n.values]
            level = 1 if both else 0
            texts = [p.text if p.level >= level else f"({p.text})" for p in parts]
            glue = " and " if both else " or "
            return _Part(glue.join(texts), level)
        if isinstance(n, ast.Compare):
            return _Part(self._compare(n, yes), 2)
        if isinstance(n, ast.Constant):
            return _Part("always" if bool(n.value) == yes else "never", 2)
        if isinstance(n, ast.Name):
            return _Part(self._name(n.id, yes), 2)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "bool" and len(n.args) == 1:
            return self._truth(n.args[0], yes)
        if isinstance(n, ast.Call):
            found = self._call(n, yes)
            if found is not None:
                return _Part(found, 2)
        if isinstance(n, (ast.Attribute, ast.Subscript, ast.BinOp)):
            return _Part(f"{self.value(n)} is {'set' if yes else 'not set'}", 2)
        return _Part(f"{self.code(n)} {'holds' if yes else 'does not hold'}", 2)

    def _name(self, name: str, yes: bool) -> str:
        label = self.labels.get(name)
        if label is not None:
            self.spoken.add(name)
        if label is None:
            return f"{self.code(ast.Name(name, ast.Load()))} is {'true' if yes else 'false'}"
        if label.kind == GIVEN:
            return label.given(yes)
        if label.kind == PLATFORM:
            where = PLATFORMS.get(label.text)
            if where is not None:
                return f"vLLM runs on {where}" if yes else f"vLLM does not run on {where}"
            return f"the platform's {code_span(label.text)} is {'true' if yes else 'false'}"
        if label.switch:
            return f"{label.noun} is {'on' if yes else 'off'}"
        return f"{label.noun} is {'set' if yes else 'not set'}"

    def _compare(self, n: ast.Compare, yes: bool) -> str:
        if len(n.ops) == 1:
            op = type(n.ops[0]) if yes else _NEGATED[type(n.ops[0])]
            return self._pair(n.left, op, n.comparators[0])
        # a chain: `0 < x <= 1`
        terms = [n.left, *n.comparators]
        middle = terms[1] if len(terms) == 3 and _constant(terms[0]) and _constant(terms[2]) else None
        if middle is not None:
            low, high = self.value(terms[0]), self.value(terms[2])
            lo = "at least" if isinstance(n.ops[0], ast.LtE) else "greater than" if isinstance(n.ops[0], ast.Lt) else None
            hi = "at most" if isinstance(n.ops[1], ast.LtE) else "less than" if isinstance(n.ops[1], ast.Lt) else None
            if lo and hi:
                inside = f"{lo} {low} and {hi} {high}"
                if yes:
                    return f"{self.value(middle)} is {inside}"
                return f"{self.value(middle)} is not {inside}"
        pairs = [self._pair(a, type(op), b) for a, op, b in zip(terms, n.ops, terms[1:])]
        text = " and ".join(pairs)
        return text if yes else f"not ({text})"

    def _pair(self, left: ast.expr, op: type, right: ast.expr) -> str:
        if _is_none(left) and not _is_none(right):
            left, right = right, left
        if _is_none(right) and op in (ast.Is, ast.IsNot, ast.Eq, ast.NotEq):
            label = self._label(left)
            positive = op in (ast.IsNot, ast.NotEq)
            if label is not None:
                self.spoken.add(left.id)  # type: ignore[attr-defined]
                return label.given(positive)
            return f"{self.value(left)} is {'not None' if positive else 'None'}"
        if op in (ast.Eq, ast.NotEq) and _condition(left) and _condition(right):
            both = f"{self._truth(left, True).text}; {self._truth(right, True).text}"
            return f"both or neither of these hold: {both}" if op is ast.Eq else f"exactly one of these holds: {both}"
        if op in (ast.Eq, ast.NotEq, ast.Is, ast.IsNot):
            modulo = self._modulo(left, right, op)
            if modulo is not None:
                return modulo
            same = op in (ast.Eq, ast.Is)
            label = self._label(left)
            if label is not None and label.switch and isinstance(right, ast.Constant) and isinstance(right.value, bool):
                self.spoken.add(left.id)  # type: ignore[attr-defined]
                return f"{label.noun} is {'on' if right.value == same else 'off'}"
            return f"{self.value(left)} is {'' if same else 'not '}{self.value(right)}"
        if op in _ORDER:
            return f"{self.value(left)} is {_ORDER[op]} {self.value(right)}"
        if op in (ast.In, ast.NotIn):
            listed = _items(right)
            neg = "" if op is ast.In else "not "
            if listed is not None:
                shown = [self.value(ast.Constant(v)) for v in listed]
                if not shown:
                    return "never" if op is ast.In else "always"
                if len(shown) == 1:
                    return f"{self.value(left)} is {neg}{shown[0]}"
                more = " …" if len(shown) > MAX_ITEMS else ""
                return f"{self.value(left)} is {neg}one of {', '.join(shown[:MAX_ITEMS])}{more}"
            return f"{self.value(left)} is {neg}in {self.value(right)}"
        raise TooComplex(f"operator {op.__name__}")

    def _modulo(self, left: ast.expr, right: ast.expr, op: type) -> Optional[str]:
        """`a % b != 0`: "a is not a multiple of b"."""
        if isinstance(right, ast.Constant) and right.value == 0 and isinstance(left, ast.BinOp) and \
                isinstance(left.op, ast.Mod):
            same = op in (ast.Eq, ast.Is)
            return f"{self.value(left.left)} is {'' if same else 'not '}a multiple of {self.value(left.right)}"
        return None

    def _call(self, n: ast.Call, yes: bool) -> Optional[str]:
        f = n.func
        if isinstance(f, ast.Name) and f.id == "isinstance" and len(n.args) == 2:
            kinds = _type_names(n.args[1])
            if kinds:
                return f"{self.value(n.args[0])} is {'' if yes else 'not '}{' or '.join(kinds)}"
        if isinstance(f, ast.Name) and f.id in ("any", "all") and len(n.args) == 1 and \
                isinstance(n.args[0], ast.GeneratorExp) and len(n.args[0].generators) == 1:
            gen = n.args[0].generators[0]
            if gen.ifs:
                return None
            where = self.value(gen.iter)
            if isinstance(n.args[0].elt, ast.Constant) and n.args[0].elt.value is True:
                empty = f.id == "any"  # any(True for x in xs): xs is not empty; all(...): always
                return (f"{where} is {'not ' if yes else ''}empty") if empty else ("always" if yes else "never")
            each = self.code(n.args[0].elt)
            if (f.id == "any") == yes:
                return f"{each} holds for some item of {where}"
            return f"{each} holds for every item of {where}" if yes else f"{each} fails for some item of {where}"
        if isinstance(f, ast.Attribute) and f.attr in ("startswith", "endswith") and len(n.args) == 1:
            verb = "starts" if f.attr == "startswith" else "ends"
            return f"{self.value(f.value)} {'' if yes else 'does not '}{verb if yes else verb[:-1]} with {self.value(n.args[0])}"
        return None

    # --- values -----------------------------------------------------------------------------------
    def value(self, n: ast.expr) -> str:
        """A noun phrase for a value."""
        if isinstance(n, ast.Name) and n.id in self.labels:
            self.spoken.add(n.id)
            return self.labels[n.id].noun
        if isinstance(n, ast.Constant):
            return _constant_text(n.value)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "len" and len(n.args) == 1:
            return f"the length of {self.value(n.args[0])}"
        listed = _items(n)
        if listed is not None and len(listed) <= MAX_ITEMS:
            return "(" + ", ".join(_constant_text(v) for v in listed) + ")"
        return self.code(n)

    def _label(self, n: ast.expr) -> Optional[Label]:
        return self.labels.get(n.id) if isinstance(n, ast.Name) else None

    def code(self, n: ast.expr) -> str:
        """`n` quoted as code, each name written as users name it."""
        text = ast.unparse(_Plain(self.labels).visit(_copy(n)))
        if len(text) > MAX_CODE:
            raise TooComplex("a formula too long to quote")
        return code_span(text)


class _Plain(ast.NodeTransformer):
    def __init__(self, labels: Mapping[str, Label]) -> None:
        self.labels = labels
        self.spoken: set[str] = set()  # the labels the words name as such (not inside quoted code)

    def visit_Name(self, node: ast.Name) -> ast.expr:
        label = self.labels.get(node.id)
        return ast.Name(label.plain, ast.Load()) if label is not None else node


def _copy(n: ast.expr) -> ast.expr:
    import copy

    return copy.deepcopy(n)


def _condition(n: ast.expr) -> bool:
    """A comparison, a `not`, or `bool(...)`: a condition, not a value."""
    return isinstance(n, ast.Compare) or (isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not)) or (
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "bool")


def _is_none(n: ast.expr) -> bool:
    return isinstance(n, ast.Constant) and n.value is None


def _constant(n: ast.expr) -> bool:
    return isinstance(n, ast.Constant) or (isinstance(n, ast.UnaryOp) and isinstance(n.operand, ast.Constant))


def _items(n: ast.expr) -> Optional[list[Any]]:
    """The constants of a tuple, list or set display, or of a constant collection; else None."""
    if isinstance(n, ast.Constant) and isinstance(n.value, (tuple, frozenset, list)):
        return sorted(n.value, key=repr) if isinstance(n.value, frozenset) else list(n.value)
    if isinstance(n, (ast.Tuple, ast.List, ast.Set)) and all(isinstance(e, ast.Constant) for e in n.elts):
        items = [e.value for e in n.elts if isinstance(e, ast.Constant)]
        return sorted(items, key=repr) if isinstance(n, ast.Set) else items
    return None


_TYPES = {"int": "an integer", "float": "a number", "str": "a string", "bool": "a boolean", "list": "a list",
          "dict": "a JSON object", "tuple": "a tuple", "set": "a set"}


def _type_names(n: ast.expr) -> list[str]:
    out = []
    for e in n.elts if isinstance(n, ast.Tuple) else [n]:
        if not (isinstance(e, ast.Name) and e.id in _TYPES):
            return []
        out.append(_TYPES[e.id])
    return out


def _constant_text(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return code_span(repr(value))
    if isinstance(value, float) and math.isfinite(value) and value == int(value) and abs(value) < 1e15:
        return str(value)
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return code_span(value) if value.strip() and value == " ".join(value.split()) else code_span(repr(value))
    return code_span(repr(value))
