"""The id formula shared with the public error site (ErrLookup ErrorEntry, schema v2)."""

from __future__ import annotations

import hashlib
import re

from kb.model import REPO

# Versioned so that a future change of formula can be told apart; ids are never reused.
ID_SCHEME = "errlookup-v2: sha256(repo + '\\x01' + template + '\\x01' + file)[:16]"


def error_id(template: str, file: str, repo: str = REPO) -> str:
    return hashlib.sha256(f"{repo}\x01{template}\x01{file}".encode()).hexdigest()[:16]


_ID = re.compile(r"^[0-9a-f]{16}$")


def is_id(text: str) -> bool:
    return bool(_ID.match(text))
