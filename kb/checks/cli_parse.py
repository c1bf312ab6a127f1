"""The first thing `vllm serve` does with a command line: vLLM's FlexibleArgumentParser, rebuilt
from the scanned flag model (kb.config) and run with Python's own argparse, never vLLM's code.

vLLM rewrites the words first (`--model X` moved to the front, `_` in option names read as
`-`, `-O3` as `--optimization-level 3`, `--json-arg.key value` merged into one JSON value),
then argparse stops at the first word it cannot take: an unknown flag, a value its converter
refuses, a value outside its choices, a missing value. The converters are vLLM's, rewritten by
name (`int`, `optional_type(int)`, `human_readable_int`, `json.loads`, ...); where vLLM's message
holds something kb cannot reproduce (the repr of a function, pydantic's report on a JSON
value), the error is still predicted and `exact` is False.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, NoReturn, Optional

from kb.configmodel import STRING_METHODS, ConfigModel, Flag

PROG = "vllm serve"
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


@dataclass(frozen=True)
class ParseError:
    """Why `vllm serve` exits before building any config: argparse's message (after
    `vllm serve: error: `), the flag it concerns, and whether kb reproduces it word for word."""

    message: str
    option: Optional[str]
    exact: bool = True
    stage: str = "argparse"  # argparse, or validate (vLLM's own check of the words, before argparse)
    raised: str = ""  # the id of the error a config raises while the parser builds it from a JSON value, else ""

    @property
    def printed(self) -> str:
        return f"{PROG}: error: {self.message}" if self.stage == "argparse" else self.message


@dataclass(frozen=True)
class Parsed:
    """The command as vLLM's parser reads it: each given flag's dest and value, or the error."""

    values: dict[str, Any]
    given: tuple[str, ...]  # dests the command sets, in order
    error: Optional[ParseError] = None
    checked: bool = True  # False: the tree's flags do not make a parser argparse accepts; no verdict


class _Stop(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _Inexact(argparse.ArgumentTypeError):
    """A converter's refusal whose exact words kb cannot reproduce."""


class _Parser(argparse.ArgumentParser):
    def __init__(self, hints: Sequence[tuple[str, str]] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.hints = tuple(hints)

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments:") and len(message) <= MAX_MESSAGE:
            for pattern, hint in self.hints:  # FlexibleArgumentParser.error's own, read from the tree
                try:
                    if re.search(pattern, message):
                        message += hint
                except re.error:
                    continue
        raise _Stop(message)


MAX_MESSAGE = 10_000  # a hint's pattern (from the scanned source) is only run on a message this short


# --- vLLM's converters, by the name the flag model records ---------------------------------------
def human_readable_int(value: str) -> int:
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if match:
        number, suffix = match.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        try:
            return int(number) * _BINARY[suffix]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"Decimals are not allowed with binary suffixes like {suffix}. Did you mean to use "
                f"{number}{suffix.lower()} instead?") from None
    return int(value)


def human_readable_int_or_auto(value: str) -> int:
    value = value.strip()
    if value == "-1" or value.lower() == "auto":
        return -1
    return human_readable_int(value)


def loads(value: str) -> Any:
    return json.loads(value)


def _json_value(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        raise _Inexact(f"{value!r} is not JSON") from None


def parse_dataclass(value: str) -> Any:
    data = _json_value(value)
    if not isinstance(data, dict):
        raise _Inexact(f"{value!r} is not a JSON object")
    return data


def union_dict_and_str(value: str) -> Any:
    if not re.match(r"(?s)^\s*{.*}\s*$", value):
        return str(value)
    return None if value in ("", "None") else _json_value(value)


def parse_reasoning_parser(value: str) -> str:
    return "" if value.lower() == "none" else value


_CONVERTERS: dict[str, Callable[[str], Any]] = {
    "int": int, "float": float, "str": str, "human_readable_int": human_readable_int,
    "human_readable_int_or_auto": human_readable_int_or_auto, "loads": loads, "parse_dataclass": parse_dataclass,
    "union_dict_and_str": union_dict_and_str, "parse_reasoning_parser": parse_reasoning_parser,
    "_parse_type": _json_value,
}
_TYPE_REPR = {"int": "<class 'int'>", "float": "<class 'float'>", "str": "<class 'str'>"}


def _parse_type(inner: str) -> Callable[[str], Any]:
    convert = _CONVERTERS.get(inner, str)

    def _parse_type(val: str) -> Any:
        try:
            return convert(val)
        except ValueError:
            shown = _TYPE_REPR.get(inner)
            if shown is None:  # vLLM prints the function's repr, with its memory address
                raise _Inexact(f"Value {val} cannot be converted to {inner}.") from None
            raise argparse.ArgumentTypeError(f"Value {val} cannot be converted to {shown}.") from None

    return _parse_type


def _optional_type(inner: str) -> Callable[[str], Any]:
    parse = _parse_type(inner)

    def _optional_type(val: str) -> Any:
        if val == "" or val == "None":
            return None
        return parse(val)

    return _optional_type


def _string_lambda(steps: list[list[Any]]) -> Callable[[str], Any]:
    """vLLM's `lambda s: s.lower().replace("-", "_")`, recorded as its steps (kb.config.read)."""
    def convert(val: str) -> Any:
        for name, *args in steps:
            val = getattr(str, name)(val, *args)
        return val

    convert.__name__ = "<lambda>"
    return convert


def converter(f: Flag) -> Optional[Callable[[str], Any]]:
    """The function argparse converts the flag's value with, named as vLLM's is (argparse puts
    the name in its message: "invalid int value: 'x'")."""
    if f.type is None:
        return None
    if f.type == "_optional_type":
        return _optional_type(f.value_type or "str")
    if f.value_type and f.value_type.startswith("<lambda>["):
        try:
            steps = json.loads(f.value_type.removeprefix("<lambda>"))
        except ValueError:
            return str
        if isinstance(steps, list) and all(isinstance(s, list) and s and s[0] in STRING_METHODS and len(s) <= 4
                                           and all(isinstance(a, (str, int)) for a in s[1:]) for s in steps):
            return _string_lambda(steps)
        return str
    return _CONVERTERS.get(f.type, str)


# --- the parser ------------------------------------------------------------------------------------
class _Boolean(argparse.Action):
    """vLLM's BooleanOptionalAction / EnableDisableAction: `--x`, `--no-x`, `--enable-x` /
    `--disable-x`."""

    def __init__(self, option_strings: Sequence[str], dest: str, negative: frozenset[str] = frozenset(),
                 **kwargs: Any) -> None:
        self.negative = negative
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        setattr(namespace, self.dest, option_string not in self.negative)


def _negatives(f: Flag) -> frozenset[str]:
    inverse = {"--enable-": "--disable-", "--disable-": "--enable-"}
    out = {o for o in f.options if o.startswith("--no-") and o != f.name}
    for prefix, other in inverse.items():
        if f.name.startswith(prefix):
            out.add(other + f.name.removeprefix(prefix))
    return frozenset(o for o in out if o in f.options)


def build_parser(model: ConfigModel, platform: Optional[str] = None) -> Optional[argparse.ArgumentParser]:
    """argparse's parser of the flag model; None when a flag cannot be registered as the tree
    declares it (conflicting or malformed option strings): a parser missing a flag would refuse
    good commands, so then no verdict is given. `platform` "cuda": the choices vLLM makes from the
    platform are those it makes on CUDA (`kb check`); else such a flag takes any value."""
    parser = _Parser(model.parser_hints, prog=PROG, add_help=False)
    on_platform = dict(model.platform_choices) if platform == "cuda" else {}
    for f in model.flags:
        if f.dest in on_platform and f.choices is None:
            f = replace(f, choices=on_platform[f.dest])
        try:
            _add(parser, f)
        except (argparse.ArgumentError, ValueError, TypeError):
            return None
    return parser


def _add(parser: argparse.ArgumentParser, f: Flag) -> None:
    if f.action == "help":
        parser.add_argument(*f.options, action="store_true", dest="help")
        return
    common: dict[str, Any] = {"dest": f.dest, "default": argparse.SUPPRESS}
    if not f.options:  # the positional model tag
        parser.add_argument(f.dest, nargs=f.nargs if f.nargs is not None else None, default=argparse.SUPPRESS)
        return
    if f.action == "boolean":
        action = parser.add_argument(*f.options, action=_Boolean, negative=_negatives(f), **common)
        if f.visible:  # vLLM's EnableDisableAction names itself by the strings --help shows
            action.option_strings = list(f.visible)
    elif f.action in ("store_true", "store_false"):
        parser.add_argument(*f.options, action=f.action, **common)
    else:
        kwargs: dict[str, Any] = dict(common)
        if f.action == "append":
            kwargs["action"] = "append"
        if f.nargs is not None and f.action != "store_true":
            kwargs["nargs"] = f.nargs
            if f.nargs == "?":
                kwargs["const"] = True
        convert = converter(f)
        if convert is not None:
            kwargs["type"] = convert
        if f.choices is not None:
            kwargs["choices"] = list(f.choices)
        parser.add_argument(*f.options, **kwargs)


# --- vLLM's rewriting of the words -----------------------------------------------------------------
_NAME = re.compile(r"(?<=--)[^\.]*")


def rewrite(words: Sequence[str]) -> tuple[list[str], Optional[ParseError]]:
    """What FlexibleArgumentParser.parse_args does before argparse (for `serve`)."""
    args = list(words)
    model_at = next((i for i, a in enumerate(args) if re.match(r"^--model(=.+|$)", a)), None)
    if model_at is not None:
        if args[model_at] == "--model":
            if model_at + 1 >= len(args):
                return args, ParseError("argument --model: expected one argument", "--model", False)
            tag, rest = args[model_at + 1], model_at + 2
        else:
            tag, rest = args[model_at].removeprefix("--model="), model_at + 1
        args = [tag, *args[:model_at], *args[rest:]]
    if (args and args[0].startswith("-") and not any(re.match(r"^--config(=.+|$)", a) for a in args)
            and any(re.match(r"^--served[-_]model[-_]name(=.+|$)", a) for a in args)):
        return args, ParseError("`model` should be provided as the first positional argument when using "
                                "`vllm serve`. i.e. `vllm serve <model> --<arg> <value>`.", "--served-model-name",
                                stage="validate")
    processed: list[str] = []
    for i, arg in enumerate(args):
        if arg.startswith("--") and not arg.startswith("--help="):
            if "=" in arg:
                key, value = arg.split("=", 1)
                processed.append(_NAME.sub(lambda m: m.group(0).replace("_", "-"), key, count=1) + "=" + value)
            else:
                processed.append(_NAME.sub(lambda m: m.group(0).replace("_", "-"), arg, count=1))
        elif arg.startswith("-O") and arg != "-O":
            processed += ["--optimization-level", arg[3:] if arg[2:3] == "=" else arg[2:]]
        elif arg == "-O" and i + 1 < len(args) and args[i + 1] in {"0", "1", "2", "3"}:
            processed.append("--optimization-level")
        else:
            processed.append(arg)
    return _merge_dotted(processed), None


def _merge_dotted(args: list[str]) -> list[str]:
    """`--compilation-config.mode 3` -> `--compilation-config '{"mode": 3}'`, appended at the end."""
    keep: list[str] = []
    merged: dict[str, dict[str, Any]] = {}
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if not (arg.startswith("-") and "." in arg.split("=", 1)[0]):
            keep.append(arg)
            continue
        if "=" in arg:
            name, text = arg.split("=", 1)
        elif i + 1 < len(args):
            name, text, skip = arg, args[i + 1], True
        else:
            keep.append(arg)
            continue
        if name.endswith("+"):
            name, text = name[:-1], json.dumps(text.split(","))
        key, *path = name.split(".")
        value: Any
        try:
            value = json.loads(text)
        except ValueError:
            try:
                value = human_readable_int(text)
            except (ValueError, argparse.ArgumentTypeError):
                value = text
        target = merged.setdefault(key, {})
        for part in path[:-1]:
            nxt = target.get(part)
            target = target.setdefault(part, {}) if not isinstance(nxt, dict) else nxt
        if path:
            old = target.get(path[-1])
            target[path[-1]] = old + value if isinstance(old, list) and isinstance(value, list) else value
    for key, value in merged.items():
        keep += [key, json.dumps(value)]
    return keep


# per platform, the last model and its parser
_LAST: dict[Optional[str], tuple[ConfigModel, Optional[argparse.ArgumentParser]]] = {}


def _parser_of(model: ConfigModel, platform: Optional[str] = None) -> Optional[argparse.ArgumentParser]:
    """build_parser, once per flag model and platform in a row (kb lint parses every example fix of a release)."""
    held = _LAST.get(platform)
    if held is None or held[0] is not model:
        held = _LAST[platform] = (model, build_parser(model, platform))
    return held[1]


def argument_name(model: ConfigModel, dest: str) -> Optional[str]:
    """How argparse names a flag in its errors (`--attention-config/-ac`), from the parser kb builds."""
    parser = _parser_of(model)
    action = next((a for a in parser._actions if a.dest == dest and a.option_strings), None) if parser else None
    return "/".join(action.option_strings) if action is not None else None


def has_parser(config: Optional[ConfigModel]) -> bool:
    """The tree's `vllm serve` parser was found, with its positional model: its flags are all
    there is to accept (a partial read would refuse good commands as unrecognized)."""
    return config is not None and config.parser_file is not None and any(not f.options for f in config.flags) \
        and len(config.flags) > 2


def parse_command(model: ConfigModel, words: Sequence[str], platform: Optional[str] = None) -> Parsed:
    """The words after `vllm serve`, as vLLM's parser reads them: the values, or the first error.
    `platform` "cuda": as on an NVIDIA GPU (build_parser)."""
    args, problem = rewrite(words)
    if problem is not None:
        return Parsed({}, (), problem)
    parser = _parser_of(model, platform)
    if parser is None:
        return Parsed({}, (), None, checked=False)
    try:
        namespace = parser.parse_args(args)
    except _Stop as stop:
        option = re.match(r"argument ([^:]+):", stop.message)
        name = option.group(1).split("/")[0] if option else None
        cause = stop.__context__
        exact = not isinstance(cause, _Inexact) and not (isinstance(cause, argparse.ArgumentError)
                                                         and isinstance(cause.__context__, _Inexact))
        return Parsed({}, (), ParseError(stop.message, name, exact))
    values = {k: v for k, v in vars(namespace).items() if k != "help"}
    return Parsed(values, tuple(values))
