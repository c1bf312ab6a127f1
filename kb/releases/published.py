"""Project settings read from kb/releases/releases.toml (shipped with the package)."""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path

from kb.errors import KBError

RELEASES_TOML = _FILE = Path(__file__).with_name("releases.toml")


@lru_cache(maxsize=1)
def _data() -> dict[str, object]:
    with _FILE.open("rb") as f:
        return tomllib.load(f)


def pinned_release() -> str:
    return str(_data()["pinned"])


def published_releases() -> list[str]:
    value = _data()["published"]
    if not isinstance(value, list):
        raise KBError("`published` must be a list of versions", str(_FILE))
    return [str(v) for v in value]
