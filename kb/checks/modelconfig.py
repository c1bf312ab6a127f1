"""Where `kb check` reads the model's config.json when --model-config is not given, as vLLM
finds it, but never online: the model vLLM reads the config of (`--hf-config-path`, else MODEL)
when it is a local folder holding config.json, else that model id's config.json in the local
Hugging Face cache at `--revision` (kb/config/hfcache.py)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from kb.checks.cli_parse import has_parser, parse_command
from kb.checks.launch import parse_launch, serve_words
from kb.config.hfcache import config_in_cache, hub_cache
from kb.configmodel import ConfigModel


@dataclass(frozen=True)
class ConfigSource:
    """Which config.json `kb check` read, or where it looked."""

    how: str  # "given" (--model-config), "folder" (a local model folder), "hf-cache", "none" (not found)
    path: Optional[str] = None  # the config.json read
    model: Optional[str] = None  # what vLLM reads the config of: MODEL, or --hf-config-path
    revision: Optional[str] = None  # --revision, when given
    cache: Optional[str] = None  # the Hugging Face cache folder kb looked in

    def to_json(self) -> dict[str, Optional[str]]:
        return {"source": self.how, "path": self.path, "model": self.model, "revision": self.revision,
                "hfCache": self.cache}


def model_of(argv: Sequence[str], flags: Optional[ConfigModel]) -> tuple[Optional[str], Optional[str]]:
    """What vLLM reads config.json of (--hf-config-path, else MODEL) and the --revision given, as
    vLLM's parser reads the command (kb/checks/cli_parse.py); where it refuses the command, MODEL
    as kb's launch parsing reads it and the words of --revision and --hf-config-path."""
    words = serve_words(argv)
    if flags is not None and has_parser(flags):
        parsed = parse_command(flags, words, platform="cuda")
        if parsed.error is None:
            v = parsed.values
            model = v.get("hf_config_path") or v.get("model_tag") or v.get("model")
            revision = v.get("revision")
            return (model if isinstance(model, str) else None), (revision if isinstance(revision, str) else None)
    given = _words_of(words, ("--hf-config-path", "--revision"))
    return given.get("--hf-config-path") or parse_launch(argv).model, given.get("--revision")


def find_config(model: Optional[str], revision: Optional[str], env: Mapping[str, str]
                ) -> tuple[Optional[Path], ConfigSource]:
    """The config.json of `model` on this machine, and where it came from; (None, "none") when
    there is none (a local path without one, or a model id the cache does not hold)."""
    if not model:
        return None, ConfigSource("none")
    try:
        local = Path(model)
        if local.exists():  # a local path: vLLM (transformers) reads only there
            file = local.absolute() / "config.json"
            return (file, ConfigSource("folder", str(file), model, revision)) if file.is_file() else \
                (None, ConfigSource("none", None, model, revision))
    except (OSError, ValueError):  # a name the system refuses (a NUL, too long)
        return None, ConfigSource("none", None, model, revision)
    cache = str(hub_cache(env))
    found = config_in_cache(model, revision, env)
    if found is None:
        return None, ConfigSource("none", None, model, revision, cache)
    return found, ConfigSource("hf-cache", str(found), model, revision, cache)


_SPLIT = re.compile(r"^(--[\w-]+)=(.*)$", re.DOTALL)


def _words_of(words: Sequence[str], names: Sequence[str]) -> dict[str, str]:
    """The last value given for each of these options (`--name value` or `--name=value`)."""
    out: dict[str, str] = {}
    for i, word in enumerate(words):
        m = _SPLIT.match(word)
        name, value = (m.group(1), m.group(2)) if m else (word, words[i + 1] if i + 1 < len(words) else None)
        if name.replace("_", "-") in names and value is not None:
            out[name.replace("_", "-")] = value
    return out
