"""The output folder: built beside the target, swapped in only when everything succeeded.

Files whose inputs did not change since the previous build (the manifest records a key per
file: the hash of its inputs or of its bytes) are hard-linked from it instead of rewritten.
Paths are plain strings here: this runs for tens of thousands of files.
"""

from __future__ import annotations

import errno
import glob
import gzip
import hashlib
import json
import os
import shutil
import tempfile
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

MANIFEST = ".kb-build.json.gz"  # the key of every file, gzipped: it is published with the site
LEGACY_MANIFEST = ".kb-build.json"  # a site built by an older kb: still recognised, its keys still used
KEY_CHARS = 32  # hex digits of a key kept in the manifest (128 bits: a change is never missed by chance)
OWNER = ".kb-owner"  # in a temporary folder: the process that made it, so a later build knows it is stale
UNOWNED_AGE = 3600.0  # seconds after which a temporary folder without an owner (older kb) counts as stale


class Output:
    """Raises OSError (with the file name) when the folder cannot be made or written; the
    previous site is left as it was."""

    def __init__(self, target: Path, keep: bool = True) -> None:
        """`keep`: take over the files of the previous build whose inputs did not change (not when
        its files may not be what it wrote)."""
        self.target = target
        self.old_root = str(target)
        if os.path.islink(target):
            raise NotADirectoryError(errno.ENOTDIR, "a symbolic link: kb replaces only a site folder, name it itself",
                                     str(target))
        if os.path.lexists(target) and not target.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "not a folder: kb replaces only a site folder", str(target))
        if target.is_dir() and not (target / MANIFEST).is_file() and not (target / LEGACY_MANIFEST).is_file() \
                and any(target.iterdir()):
            raise FileExistsError(errno.EEXIST, f"not a site built by kb (no {MANIFEST}): kb replaces only its own "
                                                "site folder", str(target))
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale(target)
        self.tmp = _owned_folder(target, "building")
        self.root = str(self.tmp)
        self.old: dict[str, str] = _old_keys(target) if keep else {}
        self.keys: dict[str, str] = {}
        self.sums: dict[str, tuple[bytes, int]] = {}  # file_sum of each file written (not taken over)
        self.dirs: set[str] = {self.root}
        self.written = 0
        self.kept = 0
        self.bytes = 0

    def unchanged(self, paths: Iterable[str], key: str) -> bool:
        """True, and the old files are taken over, when the previous build made every one of
        `paths` from `key` and they are all still there."""
        paths = list(paths)
        if any(self.old.get(p) != key[:KEY_CHARS] for p in paths):
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
        if self.old.get(path) == key[:KEY_CHARS]:  # same key: same bytes
            old = os.path.join(self.old_root, path)
            if os.path.isfile(old):
                self._link(old, path)
                return
        dest = os.path.join(self.root, path)
        self._folder(os.path.dirname(dest))
        with open(dest, "wb") as f:
            f.write(data)
        self.sums[path] = file_sum(data)
        self.bytes += len(data)
        self.written += 1

    def _link(self, old: str, path: str) -> None:
        self.sums.pop(path, None)  # read again for the digest, if one is asked for
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

    def commit(self, input_key: Optional[str] = None) -> None:
        """The new site in place of the old one, or (on any error) the old one as it was. With the
        `input_key` of everything the site is made from (kb/site/reuse.py), the manifest also holds
        it and the digest of the site's files, so that a build of the same inputs keeps the site."""
        os.unlink(os.path.join(self.root, OWNER))
        manifest: dict[str, object] = {"format": "kb-build/2",
                                       "keys": {k: v[:KEY_CHARS] for k, v in sorted(self.keys.items())}}
        if input_key is not None:
            manifest["input"] = input_key
            manifest["content"] = site_digest(self.root, self.keys, self.sums)[0]
        text = json.dumps(manifest, indent=0, sort_keys=True) + "\n"
        with open(os.path.join(self.root, MANIFEST), "wb") as f:
            f.write(gzip.compress(text.encode("utf-8"), mtime=0))  # mtime 0: the same keys, the same bytes
        os.chmod(self.tmp, 0o755)
        old = None
        if os.path.lexists(self.target):
            old = _owned_folder(self.target, "old")
            try:
                os.replace(self.target, old / "site")
            except OSError:
                shutil.rmtree(old, ignore_errors=True)
                raise
        try:
            os.replace(self.tmp, self.target)
        except OSError:
            if old is not None:  # put the old site back
                os.replace(old / "site", self.target)
                shutil.rmtree(old, ignore_errors=True)
            raise
        if old is not None:
            _remove_later(old)

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


MAX_MANIFEST = 64 << 20  # bytes of a manifest unpacked: a damaged or hostile one is ignored, not read whole


def read_manifest(site: Path) -> dict[str, Any]:
    """The previous build's manifest; empty when it is missing, damaged or too large."""
    try:
        if (site / MANIFEST).is_file():
            with gzip.open(site / MANIFEST, "rb") as f:
                raw = f.read(MAX_MANIFEST + 1)
        else:
            with open(site / LEGACY_MANIFEST, "rb") as f:
                raw = f.read(MAX_MANIFEST + 1)
        if len(raw) > MAX_MANIFEST:
            return {}
        manifest = json.loads(raw.decode("utf-8"))
    except (OSError, EOFError, zlib.error, ValueError, TypeError, RecursionError):
        return {}
    return manifest if isinstance(manifest, dict) else {}


def _old_keys(site: Path) -> dict[str, str]:
    """The previous build's key per file (cut to KEY_CHARS); nothing when the manifest is
    missing, damaged or too large."""
    keys = read_manifest(site).get("keys")
    if not isinstance(keys, dict):
        return {}
    return {k: v[:KEY_CHARS] for k, v in keys.items() if isinstance(k, str) and isinstance(v, str)}


def file_sum(data: bytes) -> tuple[bytes, int]:
    """One file's part of the site's digest: the digest of its bytes, and their number."""
    return hashlib.blake2b(data, digest_size=16).digest(), len(data)


def site_digest(root: str, paths: Iterable[str], known: Optional[dict[str, tuple[bytes, int]]] = None) -> \
        tuple[str, int]:
    """A digest of the files `paths` of the folder `root` (names and bytes), and their bytes;
    `known`: the file_sum of files just written (the others are read)."""
    h = hashlib.blake2b(digest_size=16)
    total = 0
    for path in sorted(paths):
        found = known.get(path) if known is not None else None
        if found is None:
            with open(os.path.join(root, path), "rb") as f:
                found = file_sum(f.read())
        digest, size = found
        h.update(b"%s\0%d\0%s" % (path.encode("utf-8", "surrogateescape"), size, digest))
        total += size
    return h.hexdigest(), total


@dataclass(frozen=True)
class SiteCheck:
    """What the manifest of the site at a target says of it, and whether its files agree."""

    built_from: bool = False  # the manifest names the input key asked about
    intact: bool = False  # the folder holds exactly the files the manifest lists, with their bytes (digest)
    files: int = 0
    bytes: int = 0


def check_site(target: Path, input_key: str) -> SiteCheck:
    """Whether the site at `target` was built from `input_key` and is still what that build wrote."""
    if os.path.islink(target) or not target.is_dir():
        return SiteCheck()
    manifest = read_manifest(target)
    keys = manifest.get("keys")
    if manifest.get("input") != input_key or not isinstance(keys, dict) or not isinstance(manifest.get("content"), str):
        return SiteCheck()
    root = str(target)
    found: set[str] = set()
    for folder, _dirs, files in os.walk(root):
        rel = os.path.relpath(folder, root)
        found.update(name if rel == "." else f"{rel}/{name}".replace(os.sep, "/") for name in files)
    found.discard(MANIFEST)
    if found != set(keys):
        return SiteCheck(built_from=True)
    try:
        digest, size = site_digest(root, found)
    except OSError:
        return SiteCheck(built_from=True)
    return SiteCheck(True, digest == manifest["content"], len(found), size)


def _process_start(pid: int) -> str:
    """When process `pid` started (clock ticks since boot, from /proc), so that a reused pid is
    not taken for the build that wrote it; empty where /proc is not there."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return ""


def _owned_folder(target: Path, kind: str) -> Path:
    """A new temporary folder `.NAME.<kind>-XXXX` beside the target, marked as this process's."""
    folder = Path(tempfile.mkdtemp(prefix=f".{target.name}.{kind}-", dir=target.parent))
    pid = os.getpid()
    (folder / OWNER).write_text(f"{pid} {_process_start(pid)}\n", encoding="utf-8")
    return folder


def _alive(owner: Path) -> bool:
    try:
        pid_text, _, start = owner.read_text(encoding="utf-8").strip().partition(" ")
        pid = int(pid_text)
    except (OSError, ValueError):
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's
    return not start or _process_start(pid) in ("", start)


def remove_stale(target: Path) -> list[Path]:
    """Remove the temporary folders beside `target` left by builds that died (killed, power
    lost): `.NAME.building-*` and `.NAME.old-*` whose owner process is gone. Those without an
    owner file (made by an older kb) count as stale after an hour."""
    removed = []
    for kind in ("building", "old"):
        for folder in target.parent.glob(f".{glob.escape(target.name)}.{kind}-*"):
            if folder.is_symlink() or not folder.is_dir():
                continue
            owner = folder / OWNER
            try:
                if _alive(owner) if owner.is_file() else time.time() - folder.stat().st_mtime < UNOWNED_AGE:
                    continue
            except OSError:
                continue
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


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
