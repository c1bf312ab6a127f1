"""The configuration model of one vLLM tree: frozen dataclasses handed to later stages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Union

from kb.model import Located

JSON = Union[None, bool, int, float, str, list[Any], dict[str, Any]]
CONFIG_FORMAT = "kb-config/1"


@dataclass(frozen=True)
class Flag:
    """One argparse action of `vllm serve`, as vLLM's own parser would hold it.

    `default` is a JSON value when `default_exact`, else the Python repr vLLM prints
    (`AttentionConfig(backend=None, ...)`, `set()`); `default_known` is False when the source's
    default could not be followed (then `default` is its source text)."""

    name: str  # the first long option (`--tensor-parallel-size`), or the dest of a positional
    options: tuple[str, ...]  # every option string argparse accepts, the visible ones first
    visible: tuple[str, ...]  # those `--help` shows
    dest: str
    action: str  # store, store_true, store_false, boolean, append, count, custom:<Class>
    type: Optional[str]  # int, float, str, json, bool-or-str, <function name>, ...
    nargs: Optional[Union[str, int]]
    choices: Optional[tuple[JSON, ...]]
    default: JSON
    default_exact: bool
    default_known: bool
    help: str
    group: str
    config_class: Optional[str]  # the config dataclass and field whose kwargs built it
    config_field: Optional[str]
    deprecated: bool
    file: str
    line: int

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "options": list(self.options), "visible": list(self.visible), "dest": self.dest,
            "action": self.action, "type": self.type, "nargs": self.nargs,
            "choices": None if self.choices is None else list(self.choices),
            "default": self.default, "default_exact": self.default_exact, "default_known": self.default_known,
            "help": self.help, "group": self.group, "config_class": self.config_class,
            "config_field": self.config_field, "deprecated": self.deprecated, "file": self.file, "line": self.line,
        }


@dataclass(frozen=True)
class FlagGroup:
    title: str
    description: str


@dataclass(frozen=True)
class ConfigModel:
    """`flags` sorted by name; `warnings` say what could not be read (located)."""

    flags: tuple[Flag, ...]
    groups: tuple[FlagGroup, ...]
    parser_file: Optional[str]  # where `make_arg_parser` was found
    warnings: tuple[Located, ...]

    @property
    def counts(self) -> dict[str, int]:
        return {"flags": len(self.flags), "groups": len(self.groups),
                "defaults_unresolved": sum(not f.default_known for f in self.flags),
                "warnings": len(self.warnings)}

    def flag(self, option: str) -> Optional[Flag]:
        return next((f for f in self.flags if option in f.options or f.dest == option), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": CONFIG_FORMAT,
            "parser_file": self.parser_file,
            "counts": self.counts,
            "groups": [{"title": g.title, "description": g.description} for g in self.groups],
            "flags": [f.to_json() for f in self.flags],
            "warnings": [{"path": w.path, "line": w.line, "message": w.message} for w in self.warnings],
        }
