"""A model's config.json in the local Hugging Face cache, found as huggingface_hub lays it out
(without importing it, and never online): the cache folder from HF_HUB_CACHE (or its older name
HUGGINGFACE_HUB_CACHE), else HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub, else
~/.cache/huggingface/hub; in it `models--{org}--{name}/refs/{revision}` names the commit whose
`snapshots/{commit}/config.json` is the file (a revision that is itself a cached commit needs no
ref). `kb check` and `kb fit` read the file found through kb's bounded config.json reader."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Optional

DEFAULT_REVISION = "main"
# huggingface_hub's repo ids: `name` or `org/name`, of letters, digits, `-`, `_`, `.` (at most 96)
_REPO_ID = re.compile(r"^(?:[\w.-]{1,96}/)?[\w.-]{1,96}$", re.ASCII)
# a branch, tag or commit: refs/pr/1 has slashes; no `..` part, no empty part
_REVISION = re.compile(r"^[\w.+=-]+(?:/[\w.+=-]+)*$", re.ASCII)
_MAX_REF_BYTES = 256  # a ref file holds one commit id (40 hex characters)
_VAR = re.compile(r"\$(\w+)|\$\{(\w+)\}", re.ASCII)


def hub_cache(env: Mapping[str, str]) -> Path:
    """The cache folder huggingface_hub uses under this environment (an empty variable counts as unset)."""
    def get(name: str) -> Optional[str]:
        return env.get(name) or None

    home = get("HF_HOME") or os.path.join(get("XDG_CACHE_HOME") or os.path.join("~", ".cache"), "huggingface")
    folder = get("HF_HUB_CACHE") or get("HUGGINGFACE_HUB_CACHE") or os.path.join(home, "hub")
    return Path(_expanded(folder, env))


def config_in_cache(model: str, revision: Optional[str], env: Mapping[str, str]) -> Optional[Path]:
    """The cached config.json of model `org/name` at `revision` (default main), or None when the
    cache does not hold it (or the id or revision is not one huggingface_hub could have written)."""
    revision = revision or DEFAULT_REVISION
    if not _REPO_ID.match(model) or not _plain(model) or not _plain(revision):
        return None
    repo = hub_cache(env) / ("models--" + model.replace("/", "--"))
    try:
        commit = _ref(repo / "refs" / revision) or revision
        if not _plain(commit) or "/" in commit:
            return None
        file = repo / "snapshots" / commit / "config.json"
        return file if file.is_file() else None  # a link to the cached blob is followed
    except (OSError, ValueError):  # a folder that cannot be read, a name the system refuses
        return None


def _ref(path: Path) -> Optional[str]:
    """The commit a ref file names, read bounded; None when there is no such ref."""
    if not path.is_file():
        return None
    with open(path, "rb") as f:
        text = f.read(_MAX_REF_BYTES + 1)
    if len(text) > _MAX_REF_BYTES:
        return ""
    return text.decode("ascii", errors="replace").strip()


def _plain(name: str) -> bool:
    return bool(_REVISION.match(name)) and not {".", ".."} & set(name.split("/"))


def _expanded(path: str, env: Mapping[str, str]) -> str:
    """`~` and `$VAR` as huggingface_hub expands them (os.path.expanduser, expandvars), from `env`."""
    path = _VAR.sub(lambda m: env.get(m.group(1) or m.group(2), m.group(0)), path)
    if path == "~" or path.startswith("~/"):
        home = env.get("HOME") or os.path.expanduser("~")
        path = home + path[1:]
    return path
