"""Where things live: the user cache, and the data folders shipped with the package."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from kb.errors import KBError

PACKAGE_DIR = Path(__file__).resolve().parent
SCHEMAS = PACKAGE_DIR / "schemas"
FAMILIES = "families"  # the sub-folder of errors/ that holds the family files
REPORTS = "reports"  # the sub-folder of errors/ that holds the public reports


def cache_dir() -> Path:
    """`KB_CACHE_DIR` when set, else the user cache folder of this OS (e.g. ~/.cache/kb)."""
    env = os.environ.get("KB_CACHE_DIR")
    return Path(env) if env else Path(platformdirs.user_cache_dir("kb", appauthor=False))


# Top-level folder of the repository -> where a wheel carries it inside the package.
_SHIPPED = {"templates": "templates", "errors": "curated"}


def data_dir(name: str) -> Path:
    """`templates` or `errors`: inside the installed package, else at the top of a checkout."""
    for candidate in (PACKAGE_DIR / _SHIPPED[name], PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise KBError(f"the {name}/ folder is missing from this installation of kb", str(PACKAGE_DIR))
