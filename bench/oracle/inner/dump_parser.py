"""Runs INSIDE the oracle venv: dump vLLM's own `vllm serve` argparse parser as JSON.

    python dump_parser.py OUT.json VERSION
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

# vLLM builds its parser from sys.argv: help texts (config docstrings) only when an argument
# contains "--help" (vllm/engine/arg_utils.py NEEDS_HELP, read at import), and --model only unless
# "serve" and exactly "--help" are both in it. This is the argv of `vllm serve --help=all`: help
# texts, and --model kept, as in that command's output. Set before vLLM is imported.
_OUT, _VERSION = sys.argv[1], sys.argv[2]
sys.argv = ["vllm", "serve", "--help=all"]

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vllm_cli import build_parsers  # noqa: E402

HUGE = 10**6  # help text unwrapped: one line per paragraph or list item


def _plain(value):
    """(JSON value, exact): exact is False when something had to be repr()'d."""
    if value is None or isinstance(value, (bool, str)):
        return value, True
    if isinstance(value, int) and type(value) is int:
        return value, True
    if isinstance(value, float) and type(value) is float:
        return (value, True) if math.isfinite(value) else (repr(value), False)
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        items = [_plain(v) for v in value]
        return [v for v, _ in items], all(ok for _, ok in items)
    if isinstance(value, dict) and type(value) is dict and all(isinstance(k, str) for k in value):
        items = {k: _plain(v) for k, v in value.items()}
        return {k: v for k, (v, _) in items.items()}, all(ok for _, ok in items.values())
    return repr(value), False


def _type_name(t):
    if t is None:
        return None
    name = getattr(t, "__name__", None)
    return name if name else repr(t)


def dump(out: Path, version: str) -> int:
    _, serve, _ = build_parsers()
    formatter = serve._get_formatter()

    group_of = {}
    for group in serve._action_groups:
        for action in group._group_actions:
            group_of.setdefault(id(action), group.title)
    aliases: dict[int, list[str]] = {}
    for opt, action in serve._option_string_actions.items():
        aliases.setdefault(id(action), []).append(opt)
    deprecated = {id(a) for a in getattr(serve, "_deprecated", set())}

    actions = []
    for action in serve._actions:
        default, default_exact = _plain(action.default)
        if action.default is argparse.SUPPRESS:
            default, default_exact = "==SUPPRESS==", True
        choices = None
        if action.choices is not None:
            choices, _ = _plain(list(action.choices))
        if action.help is argparse.SUPPRESS:
            help_text, suppressed = None, True
        else:
            suppressed = False
            help_text = "\n".join(formatter._split_lines(formatter._expand_help(action), HUGE)) \
                if action.help is not None else None
        visible = list(action.option_strings)
        all_opts = sorted(set(visible) | set(aliases.get(id(action), [])),
                          key=lambda o: (visible.index(o) if o in visible else len(visible), o))
        actions.append({
            "option_strings": all_opts,
            "visible_option_strings": visible,
            "dest": action.dest,
            "default": default,
            "default_is_repr": not default_exact,
            "choices": choices,
            "type": _type_name(action.type),
            "nargs": action.nargs,
            "metavar": _plain(action.metavar)[0],
            "action": type(action).__name__,
            "help": help_text,
            "help_suppressed": suppressed,
            "invocation": None if suppressed else formatter._format_action_invocation(action),
            "group": group_of.get(id(action)),
            "required": bool(action.required),
            "deprecated": id(action) in deprecated,
        })
    actions.sort(key=lambda a: (a["visible_option_strings"] or [a["dest"]], a["dest"]))

    groups = [{"title": g.title, "description": g.description, "count": len(g._group_actions)}
              for g in serve._action_groups]
    doc = {
        "vllm_version": version,
        "generated_by": "bench/oracle/help.py",
        "parser": {"prog": serve.prog, "usage": serve.usage},
        "groups": groups,
        "action_count": len(actions),
        "actions": actions,
    }
    out.write_text(json.dumps(doc, indent=1, ensure_ascii=False, sort_keys=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(dump(Path(_OUT), _VERSION))
