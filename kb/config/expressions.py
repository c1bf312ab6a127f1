"""The reader's expressions: an expression's value over the values of kb.config.values, names,
attributes, operators, comparisons, comprehensions and subscripts, bounded in depth; what cannot be
followed is `Unknown`."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any, Optional, Union

from kb.config.lookup import MAX_LOOP, PLAIN, SUPPRESS, VALUE_ERRORS, VALUES, Lookup, source_text
from kb.config.refs import PLATFORM, ClassRef, Frame, FunctionRef, Method, SuperRef
from kb.config.values import (
    MAX_ITEMS,
    Builtin,
    EnumMember,
    FieldKwargs,
    Group,
    Instance,
    LiteralType,
    ModuleRef,
    Parser,
    SetValue,
    Unknown,
    bounded,
)

MAX_EXPR_DEPTH = 100
# What vLLM's platform object answers where the parser reads it (`choices=[..., current_platform.device_type]`)
# on an NVIDIA GPU, the platform `kb check` assumes and vLLM's help was recorded on (bench/oracle/).
PLATFORM_OBJECT = "vllm.platforms.current_platform"
_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
    ast.BitOr: operator.or_, ast.BitAnd: operator.and_, ast.LShift: operator.lshift,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
    ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b,
}
_STR_METHODS = {"replace", "lower", "upper", "strip", "lstrip", "rstrip", "removeprefix", "removesuffix", "title",
                "startswith", "endswith", "split", "join", "capitalize"}
_DICT_METHODS = {"pop", "get", "items", "keys", "values", "update", "copy", "setdefault"}
_LIST_METHODS = {"remove", "append", "extend", "copy", "insert", "index", "pop"}
_PARSER_METHODS = {"add_argument", "add_argument_group", "add_mutually_exclusive_group", "set_defaults"}


def _is_number(v: Any) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) or isinstance(v, bool)


class Expressions(Lookup):
    def eval(self, node: ast.expr, frame: Frame, depth: int = 0) -> Any:
        self.step()
        if depth > MAX_EXPR_DEPTH:
            return Unknown("<expression too deep>")
        try:
            return bounded(self._eval(node, frame, depth + 1))
        except VALUE_ERRORS:
            return Unknown(source_text(node))

    def _eval(self, node: ast.expr, frame: Frame, depth: int) -> Any:
        ev = self.eval
        if isinstance(node, ast.Constant):
            return node.value if not isinstance(node.value, bytes) else Unknown("<bytes>")
        if isinstance(node, ast.Name):
            if node.id in frame.locals:
                return frame.locals[node.id]
            if node.id in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[node.id]
            return self.global_value(frame.module, node.id)
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    parts.append(str(v.value))
                    continue
                if not isinstance(v, ast.FormattedValue):
                    return Unknown(source_text(node))
                x = ev(v.value, frame, depth)
                if v.format_spec is not None or v.conversion not in (-1, ord("s")) or not isinstance(x, PLAIN):
                    return Unknown(source_text(node))
                parts.append(str(x))
            return "".join(parts)
        if isinstance(node, ast.Attribute):
            return self.attribute(ev(node.value, frame, depth), node.attr, frame, node)
        if isinstance(node, ast.Subscript):
            base = ev(node.value, frame, depth)
            if isinstance(base, Builtin) and base.name.split(".")[-1] == "Literal":
                members = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
                options: list[Any] = []
                for item in members:
                    v = ev(item, frame, depth)
                    options += list(v.options) if isinstance(v, LiteralType) else [v]
                return LiteralType(tuple(options))
            index = ev(node.slice, frame, depth)
            if isinstance(base, (dict, list, tuple, str)) and isinstance(index, (str, int)):
                return base[index]  # type: ignore[index]
            return Unknown(source_text(node))
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items: list[Any] = []
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    v = ev(e.value, frame, depth)
                    if not isinstance(v, (list, tuple)):
                        return Unknown(source_text(node))
                    items += list(v)
                else:
                    items.append(ev(e, frame, depth))
                if len(items) > MAX_ITEMS:
                    return Unknown("<too many items>")
            if isinstance(node, ast.List):
                return items
            return tuple(items) if isinstance(node, ast.Tuple) else SetValue(tuple(items))
        if isinstance(node, ast.Dict):
            out: dict[Any, Any] = {}
            for k, v in zip(node.keys, node.values):
                if k is None:
                    spread = ev(v, frame, depth)
                    if not isinstance(spread, dict):
                        return Unknown(source_text(node))
                    if not out and isinstance(spread, FieldKwargs):
                        out = spread.like(None)
                    out.update(spread)
                else:
                    key = ev(k, frame, depth)
                    if not isinstance(key, PLAIN):
                        return Unknown(source_text(node))
                    out[key] = ev(v, frame, depth)
            return out
        if isinstance(node, ast.BinOp):
            return self.binop(node, ev(node.left, frame, depth), ev(node.right, frame, depth))
        if isinstance(node, ast.UnaryOp):
            v = ev(node.operand, frame, depth)
            if isinstance(node.op, ast.Not):
                return (not v) if isinstance(v, VALUES) else Unknown(source_text(node))
            if isinstance(node.op, ast.USub) and _is_number(v):
                return -v
            if isinstance(node.op, ast.UAdd) and _is_number(v):
                return +v
            return Unknown(source_text(node))
        if isinstance(node, ast.BoolOp):
            result: Any = None
            for value in node.values:
                result = ev(value, frame, depth)
                if not isinstance(result, VALUES):
                    return Unknown(source_text(node))
                if isinstance(node.op, ast.And) and not result:
                    return result
                if isinstance(node.op, ast.Or) and result:
                    return result
            return result
        if isinstance(node, ast.Compare):
            left = ev(node.left, frame, depth)
            for op, right_node in zip(node.ops, node.comparators):
                right = ev(right_node, frame, depth)
                if not (isinstance(left, VALUES) and isinstance(right, VALUES)):
                    return Unknown(source_text(node))
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            test = ev(node.test, frame, depth)
            if isinstance(test, PLAIN):
                return ev(node.body if test else node.orelse, frame, depth)
            return Unknown(source_text(node))
        if isinstance(node, ast.Lambda):
            return FunctionRef(frame.module, node, frame.cls, frame.owner, closure=dict(frame.locals))
        if isinstance(node, ast.Call):
            return self.call_node(node, frame, depth)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)) and len(node.generators) == 1:
            return self.comprehension(node, frame, depth)
        return Unknown(source_text(node))

    def comprehension(self, node: Union[ast.ListComp, ast.GeneratorExp], frame: Frame, depth: int) -> Any:
        gen = node.generators[0]
        iterable = self.iterate(self.eval(gen.iter, frame, depth))
        if iterable is None or not isinstance(gen.target, ast.Name) or gen.is_async:
            return Unknown(source_text(node))
        out = []
        inner = Frame(frame.module, dict(frame.locals), frame.cls, frame.owner)
        for item in iterable[:MAX_LOOP]:
            inner.locals[gen.target.id] = item
            if all(self.eval(cond, inner, depth) is True for cond in gen.ifs):
                out.append(self.eval(node.elt, inner, depth))
        return out

    def iterate(self, value: Any) -> Optional[list[Any]]:
        if isinstance(value, (list, tuple, str)):
            return list(value)
        if isinstance(value, dict):
            return list(value)
        if isinstance(value, SetValue):
            return list(value.items)
        if isinstance(value, LiteralType):
            return None
        return None

    def binop(self, node: ast.BinOp, left: Any, right: Any) -> Any:
        op = type(node.op)
        if op not in _BINOPS:
            return Unknown(source_text(node))
        if isinstance(left, str) and isinstance(right, str) and op is ast.Add:
            return left + right
        if isinstance(left, list) and isinstance(right, list) and op is ast.Add:
            return left + right
        if isinstance(left, tuple) and isinstance(right, tuple) and op is ast.Add:
            return left + right
        if _is_number(left) and _is_number(right):
            if op is ast.Pow and (abs(right) > 256 or abs(left) > 2**64):
                return Unknown(source_text(node))
            if op is ast.LShift and (not isinstance(right, int) or right > 256):
                return Unknown(source_text(node))
            if op is ast.Mult and (abs(left) > 2**256 or abs(right) > 2**256):
                return Unknown(source_text(node))
            return _BINOPS[op](left, right)
        return Unknown(source_text(node))

    def attribute(self, base: Any, attr: str, frame: Frame, node: ast.Attribute) -> Any:
        if isinstance(base, ModuleRef):
            return self.module_attr(base, attr)
        if isinstance(base, ClassRef):
            return self.class_attr(base, attr)
        if isinstance(base, SuperRef):
            return self.class_attr(base.cls, attr, start_after=base.after)
        if isinstance(base, Instance):
            return dict(base.fields).get(attr, Unknown(source_text(node)))
        if isinstance(base, EnumMember):
            if attr == "value":
                return base.value
            if attr == "name":
                return base.member
        if isinstance(base, Builtin):
            if base.name in ("argparse", "argparse.argparse") and attr == "SUPPRESS":
                return SUPPRESS
            if base.name == PLATFORM_OBJECT and attr in PLATFORM:
                return PLATFORM[attr]
            return Builtin(f"{base.name}.{attr}")
        if isinstance(base, str) and attr in _STR_METHODS:
            return Method(base, attr)
        if isinstance(base, dict) and attr in _DICT_METHODS:
            return Method(base, attr)
        if isinstance(base, list) and attr in _LIST_METHODS:
            return Method(base, attr)
        if isinstance(base, (Parser, Group)) and attr in _PARSER_METHODS:
            return Method(base, attr)
        return Unknown(source_text(node))

    def call_node(self, node: ast.Call, frame: Frame, depth: int) -> Any:
        """A call expression's value: kb/config/interp.py."""
        raise NotImplementedError
