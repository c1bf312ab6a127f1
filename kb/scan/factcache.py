"""Per-file scan facts cached by content hash (sqlite), so unchanged files are parsed once."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Optional

from kb.model import FileFacts
from kb.paths import PACKAGE_DIR


@lru_cache(maxsize=1)
def scanner_digest() -> str:
    """A hash of the code that turns a file's bytes into its facts (the scan stage and the
    dataclasses it fills): any change to it starts a new cache, so stale facts are never served."""
    h = hashlib.sha256()
    for p in sorted([*(PACKAGE_DIR / "scan").glob("*.py"), PACKAGE_DIR / "model.py"]):
        h.update(p.relative_to(PACKAGE_DIR).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


class FactCache:
    def __init__(self, folder: Optional[Path]) -> None:
        self.db: Optional[sqlite3.Connection] = None
        if folder is None:
            return
        try:
            folder.mkdir(parents=True, exist_ok=True)
            name = f"facts-{scanner_digest()}.sqlite"
            for old in folder.glob("facts-*.sqlite"):  # made by another version of the scanner
                if old.name != name:
                    old.unlink(missing_ok=True)
            self.db = sqlite3.connect(folder / name)
            self.db.execute("CREATE TABLE IF NOT EXISTS facts (key TEXT PRIMARY KEY, data TEXT NOT NULL)")
        except (OSError, sqlite3.Error):
            self.db = None  # a cache that cannot be opened only costs time

    def get_many(self, keys: Iterable[str]) -> dict[str, FileFacts]:
        if self.db is None:
            return {}
        wanted = list(keys)
        found: dict[str, FileFacts] = {}
        try:
            for i in range(0, len(wanted), 500):
                chunk = wanted[i : i + 500]
                rows = self.db.execute(
                    f"SELECT key, data FROM facts WHERE key IN ({','.join('?' * len(chunk))})", chunk
                ).fetchall()
                for key, data in rows:
                    found[key] = FileFacts.from_json(json.loads(data))
        except (sqlite3.Error, ValueError, KeyError, IndexError, TypeError):
            return found
        return found

    def put_many(self, items: dict[str, FileFacts]) -> None:
        if self.db is None or not items:
            return
        try:
            with self.db:
                self.db.executemany(
                    "INSERT OR REPLACE INTO facts (key, data) VALUES (?, ?)",
                    [(k, json.dumps(v.to_json(), separators=(",", ":"))) for k, v in items.items()],
                )
        except sqlite3.Error:
            pass

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None
