"""What a user knows before launching: a `vllm serve` command, the model's config.json and
hardware facts, turned into values of the check vocabulary (kb/vocab.py)."""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from kb.checks.vocab import (
    INPUTS,
    UNKNOWN,
    Input,
    checked_value,
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
    problems: tuple[str, ...] = ()  # values that could not be read, each located (flag, file:line)
    sources: dict[str, str] = field(default_factory=dict)  # input -> where its value came from
    bad: dict[str, str] = field(default_factory=dict)  # input -> the problem with its value (never defaulted)


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


# Real config.json files are kilobytes, the largest known a few MB. JSON of small containers
# (`[[], [], ...]`) takes 23 bytes of memory a byte parsed: 16 MB is at most about 0.4 GB.
MAX_CONFIG_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class ConfigFile:
    """A model's config.json as read: its path, its data and its text (to locate a bad value)."""

    path: str
    data: dict[str, Any]
    text: str = ""
    beside: Optional[tuple[str, ...]] = None  # the *.json files of its folder, when it was read from one

    def where(self, key_path: str) -> str:
        """`path:line` where the key is written (each part of a dotted path found after the one
        before), else the path alone."""
        pos = -1
        for part in key_path.split("."):
            found = self.text.find(json.dumps(part), pos + 1)
            if found < 0:
                return self.path
            pos = found
        return f"{self.path}:{self.text.count(chr(10), 0, pos) + 1}"


def read_config(path: Path) -> ConfigFile:
    """A model folder (with config.json) or a config.json file: a JSON object, read in bounded
    time and memory (a regular file, at most MAX_CONFIG_BYTES, nested at most a few hundred deep)."""
    file = path / "config.json" if path.is_dir() else path
    try:
        if not file.is_file():
            if file.exists():
                raise UsageError("not a regular file", str(file))
            raise UsageError("no config.json there", str(path))
        with open(file, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:
        raise UsageError(f"not a readable config.json: {e.strerror or e}", str(file)) from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise UsageError(f"not a config.json: larger than {MAX_CONFIG_BYTES // (1024 * 1024)} MB", str(file))
    try:
        text = raw.decode("utf-8-sig")  # a byte order mark, as some editors write, is not an error
        data = json.loads(text)
    except UnicodeDecodeError as e:
        raise UsageError(f"not a readable config.json: not UTF-8 (byte {e.start})", str(file)) from None
    except json.JSONDecodeError as e:
        raise UsageError(f"not a readable config.json: {e.msg} (column {e.colno})", f"{file}:{e.lineno}") from None
    except RecursionError:
        raise UsageError("not a readable config.json: nested too deeply", str(file)) from None
    except ValueError as e:  # e.g. an integer of more digits than Python converts
        raise UsageError(f"not a readable config.json: {e}", str(file)) from None
    if not isinstance(data, dict):
        raise UsageError("config.json must hold a JSON object", str(file))
    return ConfigFile(str(file), data, text, json_files_beside(file))


MAX_LISTED = 10_000  # entries of a model folder looked at


def json_files_beside(file: Path) -> Optional[tuple[str, ...]]:
    """The names of the *.json files in the folder of config.json (at most MAX_LISTED entries
    looked at; None when the folder cannot be listed or holds more)."""
    names: list[str] = []
    try:
        with os.scandir(file.parent) as entries:
            for n, entry in enumerate(entries):
                if n >= MAX_LISTED:
                    return None
                if entry.name.endswith(".json"):
                    names.append(entry.name)
    except OSError:
        return None
    return tuple(sorted(names))


def serve_words(argv: Sequence[str]) -> list[str]:
    """The words after `vllm serve` (all of them when the command does not start so)."""
    words = list(argv)
    if words[:2] == ["vllm", "serve"] or (len(words) >= 2 and words[0].endswith("/vllm") and words[1] == "serve"):
        return words[2:]
    return words


def parse_launch(argv: Sequence[str], config: ConfigFile | dict[str, Any] | None = None,
                 hardware: Optional[dict[str, Any]] = None) -> Launch:
    """The launch's inputs. A value of the wrong type or out of range is a located problem:
    that input is then unknown (no default stands in), so only the checks that need it do not run."""
    words = serve_words(argv)
    file = config if isinstance(config, ConfigFile) else ConfigFile("config.json", config) if config is not None else None
    flags = flag_index()
    json_flags = {i.json_key[0] for i in INPUTS.values() if i.json_key} | {"-sc"}
    got = _Gathered()
    ignored: list[str] = []
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
            _json_flag("--speculative-config" if name == "-sc" else name, text, got)
            continue
        negated = name.startswith("--no-") and ("--" + name[5:]) in flags and flags["--" + name[5:]].type == "bool"
        inp = flags.get("--" + name[5:]) if negated else flags.get(name)
        if inp is None:
            ignored.append(name)
            if not eq and i < len(words) and not words[i].startswith("-"):
                i += 1  # its value
            continue
        text_value: Optional[str]
        if inp.type == "bool":
            if negated:
                got.set(inp, False, name)
                continue
            if eq:
                text_value = inline
            elif i < len(words) and words[i].lower() in ("true", "false"):
                text_value = words[i]
                i += 1
            else:
                got.set(inp, True, name)
                continue
        else:
            text_value = inline if eq else (words[i] if i < len(words) else None)
            i += 0 if eq else 1
        if text_value is None:
            got.fail(inp, f"{name}: needs a value")
            continue
        try:
            got.set(inp, parse_value(inp, text_value), name)
        except ValueError as e:
            got.fail(inp, f"{name}: {e}")
    for inp in INPUTS.values():
        if inp.kind == "config" and file is not None:
            key, v = config_value(inp, file.data)
            if v is UNKNOWN and inp.beside and file.beside is not None:  # a file beside config.json
                key, v = inp.name, any(name.endswith(b) for name in file.beside for b in inp.beside)
            if v is UNKNOWN and inp.name in file.data:  # a fact given by its vocabulary name
                key, v = inp.name, file.data[inp.name]
            if v is not UNKNOWN:
                got.check(inp, v, "config.json", file.where(key) + f": {key}")
        if inp.kind == "hardware" and hardware and hardware.get(inp.name) is not None:
            got.check(inp, hardware[inp.name], inp.flags[0], inp.flags[0])
    given, sources, bad = got.values, got.sources, got.bad
    values = dict(given)
    for inp in INPUTS.values():
        if inp.kind == "config" and inp.name not in values and inp.name not in bad and file is not None:
            if inp.fallback and inp.fallback in values:
                values[inp.name] = values[inp.fallback]
                sources[inp.name] = f"config.json (same as {inp.fallback})"
            elif inp.fallback and inp.fallback in bad:
                bad[inp.name] = bad[inp.fallback]
            elif inp.default is not UNKNOWN:
                values[inp.name] = inp.default
                sources[inp.name] = "config.json (absent: default)"
    for inp in INPUTS.values():
        if inp.name in values or inp.name in bad:
            continue
        if inp.kind == "flag" and inp.fallback and inp.fallback in values:
            values[inp.name] = values[inp.fallback]
            sources[inp.name] = f"vLLM default (from {inp.fallback})"
        elif inp.kind == "flag" and inp.fallback and inp.fallback in bad:
            bad[inp.name] = bad[inp.fallback]
        elif inp.kind == "flag" and inp.default is not UNKNOWN:
            values[inp.name] = inp.default
            sources[inp.name] = "vLLM default"
    return Launch(values, dict(given), model, tuple(dict.fromkeys(ignored)), tuple(got.problems), sources, bad)


@dataclass
class _Gathered:
    """The values read so far, where each came from, and the bad ones (the last word wins)."""

    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    bad: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def set(self, inp: Input, value: Any, source: str) -> None:
        self.values[inp.name] = value
        self.sources[inp.name] = source
        self.bad.pop(inp.name, None)

    def fail(self, inp: Input, problem: str) -> None:
        self.values.pop(inp.name, None)
        self.bad[inp.name] = problem
        self.problems.append(problem)

    def check(self, inp: Input, value: Any, source: str, where: str) -> None:
        try:
            self.set(inp, checked_value(inp, value), source)
        except ValueError as e:
            self.fail(inp, f"{where}: {e}")


def _json_flag(flag: str, text: str, got: _Gathered) -> None:
    try:
        data = json.loads(text)
    except RecursionError:
        got.problems.append(f"{flag}: JSON nested too deeply")
        return
    except ValueError:
        shown = text if len(text) <= 60 else text[:57] + "..."
        got.problems.append(f"{flag}: not JSON: {shown!r}")
        return
    if not isinstance(data, dict):
        got.problems.append(f"{flag}: expected a JSON object")
        return
    for inp in INPUTS.values():
        if inp.json_key and inp.json_key[0] == flag and inp.json_key[1] in data:
            key = inp.json_key[1]
            value = data[key]
            if isinstance(value, bool) and inp.type in ("int", "size", "float"):
                value = int(value)  # pydantic reads a JSON `true` given for a number as 1
            got.check(inp, value, f"{flag} {key}", f"{flag} {key}")
