"""The output folder: built beside the target, swapped in only when everything succeeded.

Files whose inputs did not change since the previous build (the manifest records a key per
file: the hash of its inputs or of its bytes) are hard-linked from it instead of rewritten.
Paths are plain strings here: this runs for tens of thousands of files.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Optional

MANIFEST = ".kb-build.json"


class Output:
    def __init__(self, target: Path) -> None:
        self.target = target
        self.old_root = str(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.building-", dir=target.parent))
        self.root = str(self.tmp)
        self.old: dict[str, str] = {}
        if (target / MANIFEST).is_file():
            try:
                self.old = json.loads((target / MANIFEST).read_text(encoding="utf-8"))["keys"]
            except (OSError, ValueError, KeyError, TypeError):
                self.old = {}
        self.keys: dict[str, str] = {}
        self.dirs: set[str] = {self.root}
        self.written = 0
        self.kept = 0
        self.bytes = 0

    def unchanged(self, paths: Iterable[str], key: str) -> bool:
        """True, and the old files are taken over, when the previous build made every one of
        `paths` from `key` and they are all still there."""
        paths = list(paths)
        if any(self.old.get(p) != key for p in paths):
            return False
        olds = [os.path.join(self.old_root, p) for p in paths]
        if not all(os.path.isfile(o) for o in olds):
            return False
        for path, old in zip(paths, olds):
            self._link(old, path)
            self.keys[path] = key
        return True

    def write(self, path: str, data: bytes | str, key: Optional[str] = None) -> None:
        if isinstance(data, str):
            data = data.encode("utf-8")
        key = key or hashlib.sha256(data).hexdigest()
        self.keys[path] = key
        if self.old.get(path) == key:  # same key: same bytes
            old = os.path.join(self.old_root, path)
            if os.path.isfile(old):
                self._link(old, path)
                return
        dest = os.path.join(self.root, path)
        self._folder(os.path.dirname(dest))
        with open(dest, "wb") as f:
            f.write(data)
        self.bytes += len(data)
        self.written += 1

    def _link(self, old: str, path: str) -> None:
        dest = os.path.join(self.root, path)
        self._folder(os.path.dirname(dest))
        try:
            os.link(old, dest)
        except OSError:
            shutil.copy2(old, dest)
        self.bytes += os.path.getsize(dest)
        self.kept += 1

    def _folder(self, folder: str) -> None:
        if folder not in self.dirs:
            os.makedirs(folder, exist_ok=True)
            self.dirs.add(folder)

    def commit(self) -> None:
        with open(os.path.join(self.root, MANIFEST), "w", encoding="utf-8") as f:
            f.write(json.dumps({"format": "kb-build/1", "keys": dict(sorted(self.keys.items()))}, indent=0,
                               sort_keys=True) + "\n")
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
    """Delete the previous site (thousands of folders) in a detached process where possible:
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
