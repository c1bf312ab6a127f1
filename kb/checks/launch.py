"""What a user knows before launching: a `vllm serve` command, the model's config.json and
hardware facts, turned into values of the check vocabulary (kb/vocab.py)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from kb.checks.vocab import (
    INPUTS,
    UNKNOWN,
    Input,
    config_value,
    flag_index,
    parse_value,
)
from kb.errors import UsageError


@dataclass(frozen=True)
class Launch:
    values: dict[str, Any]  # every input whose value is known (given, or vLLM's default)
    given: dict[str, Any]  # only what the command, config or hardware said
    model: Optional[str] = None
    ignored_flags: tuple[str, ...] = ()  # flags no check reads
    problems: tuple[str, ...] = ()  # values that could not be parsed
    sources: dict[str, str] = field(default_factory=dict)  # input -> where its value came from


def command_words(text: str) -> list[str]:
    """The words of a shell command as written in an example: comments dropped, `\\`
    continuations joined, only the `vllm serve ...` command kept."""
    joined = " ".join(line.rstrip().removesuffix("\\") for line in text.splitlines() if not line.strip().startswith("#"))
    words = shlex.split(joined, comments=True)
    for i in range(len(words) - 1):
        if words[i].endswith("vllm") and words[i + 1] == "serve":
            words = words[i:]
            end = next((j for j, w in enumerate(words) if w in ("&&", ";", "|", "||")), len(words))
            return words[:end]
    return words


def read_config(path: Path) -> dict[str, Any]:
    """A model folder (with config.json) or a config.json file."""
    file = path / "config.json" if path.is_dir() else path
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError("no config.json there", str(path)) from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise UsageError(f"not a readable config.json: {e}", str(file)) from None
    if not isinstance(data, dict):
        raise UsageError("config.json must hold a JSON object", str(file))
    return data


def parse_launch(argv: Sequence[str], config: Optional[dict[str, Any]] = None,
                 hardware: Optional[dict[str, Any]] = None) -> Launch:
    words = list(argv)
    if words[:2] == ["vllm", "serve"] or (len(words) >= 2 and words[0].endswith("/vllm") and words[1] == "serve"):
        words = words[2:]
    flags = flag_index()
    json_flags = {i.json_key[0] for i in INPUTS.values() if i.json_key} | {"-sc"}
    given: dict[str, Any] = {}
    sources: dict[str, str] = {}
    ignored: list[str] = []
    problems: list[str] = []
    model: Optional[str] = None
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("-") or word == "-":
            if model is None:
                model = word
            continue
        name, eq, inline = word.partition("=")
        if name in ("--model",):
            model = inline if eq else (words[i] if i < len(words) else None)
            i += 0 if eq else 1
            continue
        if name in json_flags:
            text = inline if eq else (words[i] if i < len(words) else "")
            i += 0 if eq else 1
            _json_flag("--speculative-config" if name == "-sc" else name, text, given, sources, problems)
            continue
        negated = name.startswith("--no-") and ("--" + name[5:]) in flags and flags["--" + name[5:]].type == "bool"
        inp = flags.get("--" + name[5:]) if negated else flags.get(name)
        if inp is None:
            ignored.append(name)
            if not eq and i < len(words) and not words[i].startswith("-"):
                i += 1  # its value
            continue
        if inp.type == "bool":
            if negated:
                value: Any = False
            elif eq:
                value = _parse(inp, inline, name, problems)
            elif i < len(words) and words[i].lower() in ("true", "false"):
                value = _parse(inp, words[i], name, problems)
                i += 1
            else:
                value = True
        else:
            given_value = inline if eq else (words[i] if i < len(words) else None)
            i += 0 if eq else 1
            if given_value is None:
                problems.append(f"{name} needs a value")
                continue
            value = _parse(inp, given_value, name, problems)
        if value is not UNKNOWN:
            given[inp.name] = value
            sources[inp.name] = name
    for inp in INPUTS.values():
        if inp.kind == "config" and config is not None:
            v = config_value(inp, config)
            if v is UNKNOWN and inp.name in config:  # a fact given by its vocabulary name
                v = config[inp.name]
            if v is not UNKNOWN:
                given[inp.name] = v
                sources[inp.name] = "config.json"
        if inp.kind == "hardware" and hardware and hardware.get(inp.name) is not None:
            given[inp.name] = hardware[inp.name]
            sources[inp.name] = inp.flags[0]
    values = dict(given)
    for inp in INPUTS.values():
        if inp.kind == "config" and inp.name not in values and config is not None:
            if inp.fallback and inp.fallback in values:
                values[inp.name] = values[inp.fallback]
                sources[inp.name] = f"config.json (same as {inp.fallback})"
            elif inp.default is not UNKNOWN:
                values[inp.name] = inp.default
                sources[inp.name] = "config.json (absent: default)"
    for inp in INPUTS.values():
        if inp.name in values:
            continue
        if inp.kind == "flag" and inp.fallback and inp.fallback in values:
            values[inp.name] = values[inp.fallback]
            sources[inp.name] = f"vLLM default (from {inp.fallback})"
        elif inp.kind == "flag" and inp.default is not UNKNOWN:
            values[inp.name] = inp.default
            sources[inp.name] = "vLLM default"
    return Launch(values, given, model, tuple(dict.fromkeys(ignored)), tuple(problems), sources)


def _parse(inp: Input, text: str, flag: str, problems: list[str]) -> Any:
    try:
        return parse_value(inp, text)
    except ValueError:
        problems.append(f"{flag}: cannot read {text!r} as {inp.type}")
        return UNKNOWN


def _json_flag(flag: str, text: str, given: dict[str, Any], sources: dict[str, str], problems: list[str]) -> None:
    try:
        data = json.loads(text)
    except ValueError:
        problems.append(f"{flag}: not JSON: {text!r}")
        return
    if not isinstance(data, dict):
        problems.append(f"{flag}: expected a JSON object")
        return
    for inp in INPUTS.values():
        if inp.json_key and inp.json_key[0] == flag and inp.json_key[1] in data:
            given[inp.name] = data[inp.json_key[1]]
            sources[inp.name] = f"{flag} {inp.json_key[1]}"
