"""The output folder: built beside the target, swapped in only when everything succeeded.

Files whose bytes (or whose inputs, by a key recorded in the manifest) did not change since
the previous build are hard-linked from it instead of rewritten.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional

MANIFEST = ".kb-build.json"


class Output:
    def __init__(self, target: Path) -> None:
        self.target = target
        target.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.building-", dir=target.parent))
        self.old: dict[str, str] = {}
        if (target / MANIFEST).is_file():
            try:
                self.old = json.loads((target / MANIFEST).read_text(encoding="utf-8"))["keys"]
            except (OSError, ValueError, KeyError, TypeError):
                self.old = {}
        self.keys: dict[str, str] = {}
        self.dirs: set[Path] = {self.tmp}
        self.written = 0
        self.kept = 0
        self.bytes = 0

    def unchanged(self, path: str, key: str) -> bool:
        """True (and the old file is taken over) when the previous build made `path` from `key`."""
        if self.old.get(path) != key:
            return False
        old = self.target / path
        if not old.is_file():
            return False
        self._link(old, path)
        self.keys[path] = key
        return True

    def write(self, path: str, data: bytes | str, key: Optional[str] = None) -> None:
        if isinstance(data, str):
            data = data.encode("utf-8")
        self.keys[path] = key or hashlib.sha256(data).hexdigest()
        self.bytes += len(data)
        old = self.target / path
        if self.old.get(path) == self.keys[path] and old.is_file():  # same key: same bytes
            self._link(old, path)
            self.bytes -= len(data)
            return
        dest = self.tmp / path
        self._folder(dest.parent)
        dest.write_bytes(data)
        self.written += 1

    def _link(self, old: Path, path: str) -> None:
        dest = self.tmp / path
        self._folder(dest.parent)
        try:
            os.link(old, dest)
        except OSError:
            shutil.copy2(old, dest)
        self.bytes += dest.stat().st_size
        self.kept += 1

    def _folder(self, folder: Path) -> None:
        if folder not in self.dirs:
            folder.mkdir(parents=True, exist_ok=True)
            self.dirs.add(folder)

    def commit(self) -> None:
        (self.tmp / MANIFEST).write_text(
            json.dumps({"format": "kb-build/1", "keys": dict(sorted(self.keys.items()))}, indent=0, sort_keys=True) + "\n",
            encoding="utf-8")
        os.chmod(self.tmp, 0o755)
        old = None
        if self.target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.old-", dir=self.target.parent))
            os.replace(self.target, old / "site")
        os.replace(self.tmp, self.target)
        if old is not None:
            _remove_later(old)

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def _remove_later(folder: Path) -> None:
    """Delete the previous site (thousands of folders) in a forked child where possible:
    the new site is already in place, so nothing waits for it."""
    if hasattr(os, "fork"):
        try:
            pid = os.fork()
        except OSError:
            pid = -1
        if pid == 0:  # the child forks the remover and exits at once, so no zombie is left
            try:
                if os.fork() == 0:
                    os.setsid()
                    shutil.rmtree(folder, ignore_errors=True)
            finally:
                os._exit(0)
        if pid > 0:
            os.waitpid(pid, 0)
            return
    shutil.rmtree(folder, ignore_errors=True)
