"""Per-file scan facts cached by content hash (sqlite), so unchanged files are parsed once."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Iterable, Optional

from kb.model import FileFacts

# Bump when extract() changes what it records: old rows are then simply not found.
FACTS_VERSION = 1


class FactCache:
    def __init__(self, folder: Optional[Path]) -> None:
        self.db: Optional[sqlite3.Connection] = None
        if folder is None:
            return
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(folder / f"facts-v{FACTS_VERSION}.sqlite")
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
