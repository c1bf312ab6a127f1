"""A small, bounded reader of Python that follows how vLLM builds its `vllm serve` parser.

It walks function bodies statement by statement over the values of kb.config.values: module
names are resolved through imports (kb.config.modules), calls into the tree are followed
(`FrontendArgs.add_cli_args(parser)`, `optional_type(json.loads)`), `get_kwargs(Config)` is
computed from the config dataclass (kb.config.fields), and every `add_argument` on the parser
or one of its groups is recorded. Nothing is executed: what cannot be followed becomes
`Unknown`. An `if` whose test is unknown runs both branches. Steps, call depth and value sizes
are bounded, so hostile source ends in a warning, never a hang."""

from __future__ import annotations

import ast
from typing import Any, Optional, Union

from kb.config.fields import NATIVE
from kb.config.lookup import PLAIN, VALUES, Return, source_text
from kb.config.refs import Budget, ClassRef, Frame, FunctionRef, Method, SuperRef
from kb.config.statements import Statements
from kb.config.values import (
    MAX_ITEMS,
    Builtin,
    FieldKwargs,
    Group,
    LiteralType,
    Parser,
    SetValue,
    Unknown,
    copy_value,
)

MAX_ACTIONS = 5_000  # vLLM 0.33 adds 322


class Reader(Statements):
    """The reader: calls (into the tree's functions, builtins, methods of plain values and of the
    parser) here; expressions, statements and lookups in the classes it builds on."""

    def call_node(self, node: ast.Call, frame: Frame, depth: int) -> Any:
        func = self.eval(node.func, frame, depth)
        args: list[Any] = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                v = self.eval(a.value, frame, depth)
                if not isinstance(v, (list, tuple)):
                    return Unknown(source_text(node))
                args += list(v)
            else:
                args.append(self.eval(a, frame, depth))
        kwargs: dict[str, Any] = {}
        for k in node.keywords:
            v = self.eval(k.value, frame, depth)
            if k.arg is None:
                if not isinstance(v, dict) or not all(isinstance(key, str) for key in v):
                    return Unknown(source_text(node))
                if isinstance(v, FieldKwargs) and not isinstance(kwargs, FieldKwargs):
                    kwargs = v.like(kwargs)  # `**model_kwargs["seed"]`: remember the field
                kwargs.update(v)
            else:
                kwargs[k.arg] = v
        if isinstance(func, Builtin) and func.name.split(".")[-1] == "super" and not args and frame.cls and frame.owner:
            return SuperRef(frame.cls, frame.owner)
        return self.call(func, args, kwargs, frame, node)

    def call(self, func: Any, args: list[Any], kwargs: dict[str, Any], frame: Frame, node: ast.expr) -> Any:
        if isinstance(func, Method):
            return self.method(func, args, kwargs, frame, node)
        if isinstance(func, Builtin):
            return self.builtin(func.name, args, kwargs, node)
        if isinstance(func, ClassRef):
            if self.is_enum(func):
                return Unknown(source_text(node))
            return self.instance(func) if not args and not kwargs else Unknown(source_text(node))
        if isinstance(func, FunctionRef):
            native = NATIVE.get(func.name)
            if native is not None and func.cls is None:
                return native(self, args, kwargs, node)
            return self.run_function(func, args, kwargs)
        return Unknown(source_text(node))

    def run_function(self, func: FunctionRef, args: list[Any], kwargs: dict[str, Any]) -> Any:
        with self.call_depth() as ok:
            if not ok:
                return Unknown(f"{func.name}(...)")
            frame = Frame(func.module, dict(func.closure or {}), func.cls, func.owner)
            self.bind(func, [*func.bound, *args], kwargs, frame)
            if isinstance(func.node, ast.Lambda):
                return self.eval(func.node.body, frame)
            try:
                self.run(func.node.body, frame)
            except Return as r:
                return r.value
            return None

    def bind(self, func: FunctionRef, args: list[Any], kwargs: dict[str, Any], frame: Frame) -> None:
        a = func.node.args
        positional = [*a.posonlyargs, *a.args]
        defaults: list[Optional[ast.expr]] = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
        for i, (param, default) in enumerate(zip(positional, defaults)):
            if i < len(args):
                frame.locals[param.arg] = args[i]
            elif param.arg in kwargs:
                frame.locals[param.arg] = kwargs.pop(param.arg)
            elif default is not None:
                frame.locals[param.arg] = self.eval(default, Frame(func.module))
            else:
                frame.locals[param.arg] = Unknown(param.arg)
        for param, kw_default in zip(a.kwonlyargs, a.kw_defaults):
            if param.arg in kwargs:
                frame.locals[param.arg] = kwargs.pop(param.arg)
            else:
                frame.locals[param.arg] = self.eval(kw_default, Frame(func.module)) if kw_default else Unknown(param.arg)
        if a.vararg:
            frame.locals[a.vararg.arg] = tuple(args[len(positional):])
        if a.kwarg:
            frame.locals[a.kwarg.arg] = dict(kwargs)

    def builtin(self, name: str, args: list[Any], kwargs: dict[str, Any], node: ast.expr) -> Any:
        short = name.split(".")[-1]
        if name in ("os.getenv", "os.environ.get") and args and isinstance(args[0], str):
            return args[1] if len(args) > 1 else kwargs.get("default")  # the environment is empty
        plain_args = all(isinstance(x, VALUES) for x in args)
        if short in ("get_args", "typing.get_args") and len(args) == 1 and isinstance(args[0], LiteralType):
            return args[0].options
        if short == "cast" and len(args) == 2:
            return args[1]
        if short == "deepcopy" and len(args) == 1:
            return copy_value(args[0])
        if short in ("list", "tuple", "sorted", "set", "dict", "len", "int", "float", "str", "bool") and plain_args:
            if not args and not kwargs:
                return {"list": [], "tuple": (), "set": SetValue(()), "dict": {}, "int": 0, "float": 0.0,
                        "str": "", "bool": False}.get(short, Unknown(source_text(node)))
            if len(args) == 1 and not kwargs:
                x = args[0]
                if short == "list":
                    return list(x)
                if short == "tuple":
                    return tuple(x)
                if short == "sorted":
                    return sorted(x)
                if short == "len":
                    return len(x)
                if short == "set":
                    return SetValue(tuple(x))
                if short == "dict" and isinstance(x, dict):
                    return dict(x)
                if short in ("int", "float", "str", "bool") and isinstance(x, PLAIN):
                    return {"int": int, "float": float, "str": str, "bool": bool}[short](x)
            if short == "dict" and not args:
                return dict(kwargs)
        return Unknown(source_text(node))

    def method(self, m: Method, args: list[Any], kwargs: dict[str, Any], frame: Frame, node: ast.expr) -> Any:
        obj, name = m.obj, m.name
        if isinstance(obj, (Parser, Group)):
            return self.parser_method(obj, name, args, kwargs, frame, node)
        if isinstance(obj, str):
            if name == "join" and len(args) == 1 and isinstance(args[0], (list, tuple)) and \
                    all(isinstance(x, str) for x in args[0]):
                return obj.join(args[0])
            if all(isinstance(x, (str, int)) and not isinstance(x, bool) for x in args) and not kwargs:
                return getattr(obj, name)(*args)
            return Unknown(source_text(node))
        if isinstance(obj, dict):
            if name == "items":
                return [(k, v) for k, v in obj.items()]
            if name in ("keys", "values"):
                return list(getattr(obj, name)())
            if name == "update" and len(args) <= 1:
                obj.update(*(a for a in args if isinstance(a, dict)), **kwargs)
                return None
            if name in ("pop", "get", "setdefault") and args and isinstance(args[0], PLAIN):
                return getattr(obj, name)(*args[:2])
            if name == "copy":
                return obj.like(dict(obj)) if isinstance(obj, FieldKwargs) else dict(obj)
            return Unknown(source_text(node))
        if isinstance(obj, list):
            if name in ("remove", "index") and len(args) == 1:
                return getattr(obj, name)(args[0])
            if name == "append" and len(args) == 1 and len(obj) < MAX_ITEMS:
                obj.append(args[0])
                return None
            if name == "extend" and len(args) == 1 and isinstance(args[0], (list, tuple)):
                obj.extend(args[0][:MAX_ITEMS])
                return None
            if name == "insert" and len(args) == 2 and isinstance(args[0], int):
                obj.insert(args[0], args[1])
                return None
            if name == "copy":
                return list(obj)
            if name == "pop":
                return obj.pop(*args[:1])
        return Unknown(source_text(node))

    def parser_method(self, obj: Union[Parser, Group], name: str, args: list[Any], kwargs: dict[str, Any],
                      frame: Frame, node: ast.expr) -> Any:
        if name == "add_argument_group":
            title = kwargs.get("title", args[0] if args else None)
            description = kwargs.get("description", args[1] if len(args) > 1 else None)
            group = Group(title if isinstance(title, str) else "options",
                          description if isinstance(description, str) else "")
            self.parser.groups.append(group)
            return group
        if name == "add_mutually_exclusive_group":
            return obj
        if name == "set_defaults":
            self.parser.actions.append({"__set_defaults__": dict(kwargs)})
            return None
        names = [a for a in args if isinstance(a, str)]
        if len(names) != len(args) or not names:
            self.warn(frame.module, node, f"add_argument with names that could not be read: {source_text(node)[:200]}")
            return Unknown("action")
        if len(self.parser.actions) >= MAX_ACTIONS:
            raise Budget(f"more than {MAX_ACTIONS} arguments added")
        self.parser.actions.append({"names": names, "kwargs": kwargs,
                                    "group": obj.title if isinstance(obj, Group) else None,
                                    "file": frame.module.path, "line": getattr(node, "lineno", 1)})
        return Unknown("action")
