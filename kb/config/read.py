"""A vLLM tree -> its ConfigModel: the `vllm serve` parser as vLLM's own source builds it.

The parser is followed from `make_arg_parser` (vllm/entrypoints/common/cli_args.py since 0.2x,
vllm/entrypoints/openai/cli_args.py before), else from `EngineArgs.add_cli_args`; the
argparse actions recorded on the way become flags the way argparse (and vLLM's
`FlexibleArgumentParser`, `EnableDisableAction`) would make them."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Sequence
from typing import Any, Optional, TypeVar

from kb.config.assigned import assigned_fields
from kb.config.byname import name_filled
from kb.config.classdefaults import class_fields
from kb.config.computed import followed_constants, followed_digests, max_len_overrides
from kb.config.envs import read_envs
from kb.config.flow import function_flow
from kb.config.hfkeys import read_config_keys
from kb.config.interp import Reader
from kb.config.members import member_summaries
from kb.config.modules import Modules
from kb.config.names import module_names
from kb.config.order import build_order, builds, config_calls, engine_configs, parser_hints, post_init_order
from kb.config.refs import Budget, ClassRef, FunctionRef, PlatformText
from kb.config.requests import read_request_fields
from kb.config.startup import startup_order
from kb.config.values import SUPPRESS_TEXT, Builtin, FieldKwargs, Parser, Unknown, plain
from kb.configmodel import JSON, STRING_METHODS, Build, ConfigKey, ConfigModel, EnvVar, Flag, FlagGroup, RequestField
from kb.errors import Located

PARSER_MODULES = ("vllm.entrypoints.common.cli_args", "vllm.entrypoints.openai.cli_args")
ENGINE_MODULE = "vllm.engine.arg_utils"


def read_config(paths: Sequence[str], read: Callable[[str], bytes]) -> ConfigModel:
    """Never raises on what the tree holds: what cannot be read is a located warning."""
    modules = Modules(list(paths), read)
    reader = Reader(modules)
    parser_file: Optional[str] = None
    warnings: list[Located] = []
    try:
        entry = _entry(reader)
        if entry is None:
            warnings.append(Located("vllm/engine/arg_utils.py", 1,
                                    "no `vllm serve` parser found (make_arg_parser, EngineArgs.add_cli_args)"))
        else:
            parser_file = entry.module.path
            reader.run_function(entry, [reader.parser], {})
    except Budget as e:
        warnings.append(Located(parser_file or "vllm", 1, f"flags not all read: {e}"))
    except RecursionError:
        warnings.append(Located(parser_file or "vllm", 1, "flags not all read: nested too deeply"))
    platform: dict[str, tuple[str, ...]] = {}
    flags, groups = _flags(reader.parser, _has_enable_disable(modules), warnings, platform)
    env: list[EnvVar] = _inputs(modules, "environment variables", "vllm/envs.py", read_envs, warnings)
    key_modules = Modules(list(paths), read)  # up to MAX_FILES of its own: keys are read across the tree
    keys: list[ConfigKey] = _inputs(key_modules, "config.json keys", "vllm/config",
                                    lambda r: read_config_keys(r, paths), warnings)
    warnings += key_modules.warnings
    fields: list[RequestField] = _inputs(modules, "request fields", "vllm/sampling_params.py",
                                         lambda r: read_request_fields(r, paths), warnings)
    order: list[tuple[str, int]] = _inputs(modules, "the order configs are built in", "vllm/engine/arg_utils.py",
                                           lambda r: list(build_order(r)), warnings)
    made: list[Build] = _inputs(modules, "what configs are built from", "vllm/engine/arg_utils.py",
                                lambda r: list(builds(r)), warnings)
    assigned: list[tuple[str, str, str, str, int, str]] = _inputs(modules, "the fields vLLM sets itself", "vllm/config",
                                              lambda r: list(assigned_fields(r)), warnings)
    calls: list[tuple[str, str, str]] = _inputs(modules, "the config methods VllmConfig calls", "vllm/config/vllm.py",
                                                lambda r: list(config_calls(r)), warnings)
    classes = sorted({f.parses_into for f in flags if f.parses_into} | {b.config_class for b in made})
    read_fields = _inputs(modules, "the fields of the configs vLLM builds", "vllm/config",
                          lambda r: [class_fields(r, classes)], warnings)
    defaults, json_fields = read_fields[0] if read_fields else ((), ())
    locals_: list[tuple[str, str, int]] = _inputs(modules, "the configs create_engine_config keeps in locals",
                                                  "vllm/engine/arg_utils.py", lambda r: list(engine_configs(r)),
                                                  warnings)
    filled: list[tuple[str, str, str, str]] = _inputs(modules, "the fields filled by name", "vllm/config/vllm.py",
                                                      lambda r: list(name_filled(r)), warnings)
    post_init: list[tuple[str, str, int]] = _inputs(modules, "the methods __post_init__ runs", "vllm/config",
                                                    lambda r: list(post_init_order(r)), warnings)
    hints: list[tuple[str, str]] = _inputs(modules, "the parser's hints", "vllm/utils/argparse_utils.py",
                                           lambda r: list(parser_hints(r)), warnings)
    warnings += modules.warnings + reader.warnings
    return ConfigModel(tuple(flags), tuple(groups), parser_file, tuple(sorted(set(warnings), key=_where)),
                       tuple(env), tuple(keys), tuple(fields), tuple(order), tuple(hints), tuple(made),
                       tuple(assigned), tuple(calls), tuple(defaults),
                       tuple(json_fields), tuple(locals_), followed_digests(modules), max_len_overrides(modules),
                       followed_constants(modules), _names(paths, read), *_members(paths, read), tuple(filled),
                       tuple(post_init), tuple(sorted(platform.items())), startup=startup_order(modules))


def _names(paths: Sequence[str], read: Callable[[str], bytes]) -> tuple[tuple[str, str, str, JSON], ...]:
    """What the launch files' module-level names hold (kb.config.names), with modules of its own."""
    try:
        return module_names(Modules(list(paths), read), paths, read)
    except (Budget, RecursionError):
        return ()


def _members(paths: Sequence[str], read: Callable[[str], bytes]) -> tuple[
        tuple[tuple[str, str, str, str], ...], tuple[tuple[str, str, int, str], ...],
        tuple[tuple[str, str, str, int, int, str], ...]]:
    """What the configs' properties and small methods compute (kb.config.members); where the launch
    files' functions exit early, and the locals if/elif chains assign (kb.config.flow)."""
    modules = Modules(list(paths), read)
    try:
        members = member_summaries(modules, paths)
    except RecursionError:
        members = ()
    try:
        exits, chains = function_flow(modules, paths)
    except RecursionError:
        exits, chains = (), ()
    return members, exits, chains


_T = TypeVar("_T")


def _inputs(modules: Modules, what: str, where: str, read: Callable[[Reader], list[_T]],
            warnings: list[Located]) -> list[_T]:
    """One kind of input read with a reader (and step budget) of its own; its warnings kept."""
    reader = Reader(modules)
    out: list[_T] = []
    try:
        out = read(reader)
    except Budget as e:
        warnings.append(Located(where, 1, f"{what} not all read: {e}"))
    except RecursionError:
        warnings.append(Located(where, 1, f"{what} not all read: nested too deeply"))
    warnings += reader.warnings
    return out


# vLLM's SortedHelpFormatter: a single newline inside a sentence is a space; paragraphs and
# list items keep their own lines (vllm/utils/argparse_utils.py `_split_lines`).
_JOINED_NEWLINE = re.compile(r"(?<!\n)\n(?!\n)(?!\s*(-|\*|\+|\d+\.))\s*")


def shown_help(text: str) -> str:
    """The help text as `vllm serve --help` lays it out, one line per paragraph or list item."""
    return "\n".join(line.strip() for line in _JOINED_NEWLINE.sub(" ", text.strip()).splitlines() if line.strip())


def _where(w: Located) -> tuple[str, int, str]:
    return (w.path, w.line, w.message)


def _entry(reader: Reader) -> Optional[FunctionRef]:
    for name in PARSER_MODULES:
        module = reader.modules.get(name)
        if module is not None:
            found = reader.modules.lookup(module, "make_arg_parser")
            if found is not None:
                value = reader.found_value(found)
                if isinstance(value, FunctionRef):
                    return value
    module = reader.modules.get(ENGINE_MODULE)
    if module is None:
        return None
    for cls_name in ("AsyncEngineArgs", "EngineArgs"):
        found = reader.modules.lookup(module, cls_name)
        if found is not None:
            cls = reader.found_value(found)
            if isinstance(cls, ClassRef):
                method = reader.class_attr(cls, "add_cli_args")
                if isinstance(method, FunctionRef):
                    return method
    return None


def _has_enable_disable(modules: Modules) -> bool:
    """vLLM's parser pairs `--enable-x` with `--disable-x` (EnableDisableAction) since 0.3x."""
    for name in ("vllm.utils.argparse_utils", "vllm.utils"):
        module = modules.get(name)
        if module is not None and "EnableDisableAction" in module.bindings:
            return True
    return False


def _value_type(value: Any) -> Optional[str]:
    """The converter a flag's value finally goes through: the one `optional_type(...)` wraps
    (after "None" is taken as None), else the type itself."""
    if isinstance(value, Builtin) and value.inner:
        return value.inner
    if isinstance(value, FunctionRef) and value.closure:
        inner = [v for v in value.closure.values() if isinstance(v, (Builtin, FunctionRef, ClassRef))
                 and not (isinstance(v, FunctionRef) and v.node is value.node)]  # the closure holds itself
        if len(inner) == 1:  # `optional_type(json.loads)` evaluated: the closure's return_type
            return _value_type(inner[0])
    if isinstance(value, FunctionRef) and isinstance(value.node, ast.Lambda):
        steps = _string_steps(value.node)
        if steps is not None:  # `lambda s: s.lower().replace("-", "_")`
            return "<lambda>" + json.dumps(steps)
    return _name_of(value)


def _string_steps(node: ast.Lambda) -> Optional[list[list[Any]]]:
    """The str methods (with constant arguments) a one-parameter lambda applies, in order, or None."""
    params = node.args.args
    if len(params) != 1 or node.args.vararg or node.args.kwarg or node.args.kwonlyargs:
        return None
    steps: list[list[Any]] = []
    body: ast.expr = node.body
    while isinstance(body, ast.Call) and isinstance(body.func, ast.Attribute) and not body.keywords:
        if body.func.attr not in STRING_METHODS or len(steps) >= 10 or not all(
                isinstance(a, ast.Constant) and isinstance(a.value, (str, int)) for a in body.args):
            return None
        steps.insert(0, [body.func.attr, *(a.value for a in body.args if isinstance(a, ast.Constant))])
        body = body.func.value
    return steps if steps and isinstance(body, ast.Name) and body.id == params[0].arg else None


def _name_of(value: Any) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, Builtin):
        return value.name.split(".")[-1]
    if isinstance(value, (FunctionRef, ClassRef)):
        return value.name
    if isinstance(value, Unknown):
        return value.text
    return type(value).__name__


def _flags(parser: Parser, enable_disable: bool, warnings: list[Located],
           platform: Optional[dict[str, tuple[str, ...]]] = None) -> tuple[list[Flag], list[FlagGroup]]:
    """The flags and groups; `platform` gets the choices a flag makes from the platform (on CUDA)."""
    platform = {} if platform is None else platform
    flags: list[Flag] = []
    taken: set[str] = set()
    defaults: dict[str, Any] = {}
    for action in parser.actions:
        if "__set_defaults__" in action:
            defaults.update(action["__set_defaults__"])
            continue
        flag = _flag(action, enable_disable, warnings, platform)
        if flag is None or taken & set(flag.options):
            continue
        taken |= set(flag.options) or {flag.dest}
        flags.append(flag)
    flags.append(Flag("--help", ("-h", "--help"), ("-h", "--help"), "help", "help", None, 0, None, SUPPRESS_TEXT,
                      True, True, "show this help message and exit", "options", None, None, False, "", 0))
    out = []
    for f in flags:
        if f.dest in defaults:
            value, exact = plain(defaults[f.dest])
            f = _replace_default(f, value, exact, not isinstance(defaults[f.dest], Unknown))
        out.append(f)
    out.sort(key=lambda f: (list(f.visible) or [f.dest], f.dest))
    groups: dict[str, FlagGroup] = {}
    for g in parser.groups:
        groups.setdefault(g.title, FlagGroup(g.title, g.description))
    return out, list(groups.values())


def _replace_default(f: Flag, value: JSON, exact: bool, known: bool) -> Flag:
    from dataclasses import replace

    return replace(f, default=value, default_exact=exact, default_known=known)


def _flag(action: dict[str, Any], enable_disable: bool, warnings: list[Located],
          platform: dict[str, tuple[str, ...]]) -> Optional[Flag]:
    names: list[str] = action["names"]
    kwargs: dict[str, Any] = action["kwargs"]
    options = [n for n in names if n.startswith("-")]
    if options and len(options) != len(names):
        return None
    kind = kwargs.get("action")
    action_name = "store"
    default: Any = kwargs.get("default")
    visible = list(options)
    hidden: list[str] = []
    if isinstance(kind, str):
        action_name = kind
        if kind == "store_true" and "default" not in kwargs:
            default = False
        elif kind == "store_false" and "default" not in kwargs:
            default = True
    elif isinstance(kind, Builtin) and kind.name.split(".")[-1] == "BooleanOptionalAction":
        action_name = "boolean"
        negated = [f"--no-{o[2:]}" for o in options if o.startswith("--")]
        inverses = []
        if enable_disable:
            for o in options:
                for prefix, inverse in (("--enable-", "--disable-"), ("--disable-", "--enable-")):
                    if o.startswith(prefix):
                        inverses.append(inverse + o[len(prefix):])
        if inverses:
            visible = [*options, *inverses]
            hidden = negated
        else:
            visible = [*options, *negated]
    elif kind is not None:
        action_name = f"custom:{_name_of(kind)}"
    if options:
        long = [o for o in options if o.startswith("--")]
        dest_default = (long[0] if long else options[0]).lstrip("-").replace("-", "_")
    else:
        dest_default = names[0]
    dest = kwargs.get("dest") if isinstance(kwargs.get("dest"), str) else dest_default
    help_value = kwargs.get("help")
    help_text = shown_help(help_value.replace("%%", "%")) if isinstance(help_value, str) else ""
    choices_value = kwargs.get("choices")
    choices: Optional[tuple[JSON, ...]] = None
    if isinstance(choices_value, (list, tuple)) and any(isinstance(c, PlatformText) for c in choices_value):
        # made from the platform at run time: not the flag's (kb documents every platform), kept apart
        platform[str(dest)] = tuple(str(c) for c in choices_value if isinstance(c, str))
    elif isinstance(choices_value, (list, tuple)):
        choices = tuple(plain(c)[0] for c in choices_value)
    elif choices_value is not None:
        warnings.append(Located(action["file"], action["line"],
                                f"{names[0]}: choices not in the source (made at run time): {plain(choices_value)[0]}"))
    value, exact = plain(default)
    known = not isinstance(default, Unknown)
    nargs = kwargs.get("nargs")
    origin = kwargs if isinstance(kwargs, FieldKwargs) else None
    group = action["group"] or ("options" if options else "positional arguments")
    return Flag(
        name=(visible[0] if options else names[0]) if not [o for o in visible if o.startswith("--")]
        else next(o for o in visible if o.startswith("--")),
        options=tuple(dict.fromkeys([*visible, *hidden])), visible=tuple(visible), dest=str(dest),
        action=action_name, type=_name_of(kwargs.get("type")),
        nargs=nargs if isinstance(nargs, (str, int)) and not isinstance(nargs, bool) else None,
        choices=choices, default=value, default_exact=exact, default_known=known, help=help_text, group=group,
        config_class=origin.cls if origin else None, config_field=origin.name if origin else None,
        deprecated=kwargs.get("deprecated") is True, file=action["file"], line=action["line"],
        parses_into=origin.parses_into if origin else None, value_type=_value_type(kwargs.get("type")),
        constraints=origin.constraints if origin else (),
    )
