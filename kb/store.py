"""The answer store: what a warm `kb explain`, `kb search` and `kb mcp` answer from, compiled once
per release wheel into kb's cache, so that an answer neither scans the wheel nor builds the
matcher's or the searcher's tables again (kb/explain/store.py, kb/search/store.py say what each
kind holds).

One file per release and kind (`<cache>/answers/<release>-<key>.<kind>`), named by its key: a
digest of the wheel (name, size, modification time), of kb itself (every file of the package:
code, the shipped wordings) and of the curated entries folder (every file's name and bytes), so a
change of any of them compiles a new one, and the older ones of its release and kind are then
removed, the newest few kept (prune_stores). The file is written atomically:

    kb-answers/1 <sha256 of the rest>\\n
    {"kind": ..., "key": ..., "sections": {name: [start, end], ...}}\\n
    <the sections' bytes>

Every section is JSON; a table is a JSON array whose items' offsets are a section of their own,
so one item is read without the others. Reading checks the format, the digest and the header:
a file that is damaged, truncated, of another kind or key, or not kb's is removed and compiled
again, never used; nothing read is executed (JSON only)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Optional, TypeVar

from kb.errors import KBError
from kb.files import write_atomic
from kb.paths import PACKAGE_DIR

MAGIC = b"kb-answers/1 "
MAX_STORE_BYTES = 1024 * 1024 * 1024  # the stores of one release are ~15 MB
# Stores of a release and kind kept when a new one is written: the new one and the two written
# before it, so that two or three kb installs (or entries folders) sharing one cache do not
# compile each other's stores away on every run; older keys are removed (prune_stores).
KEEP_STORES = 3
STALE_TEMP_SECONDS = 3600  # a half-written store (write_atomic's temporary file) older than this was abandoned
_STORE_NAME = re.compile(r"(?P<release>[0-9A-Za-z][0-9A-Za-z.+_-]*)-[0-9a-f]{32}\.(?P<kind>[a-z]+)")
_TEMP_NAME = re.compile(r"\.(?P<store>.+)\.[0-9A-Za-z_]{8}")  # tempfile.mkstemp(prefix=f".{name}.")


def _dumps(obj: Any) -> bytes:
    """JSON as it is given (keys in their order: entries read back are the dicts given)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class Sections:
    """The sections of a store being compiled, in order."""

    def __init__(self) -> None:
        self.parts: dict[str, bytes] = {}

    def add(self, name: str, obj: Any) -> None:
        self.parts[name] = _dumps(obj)

    def table(self, name: str, items: Sequence[Any]) -> None:
        """`items` as one JSON array, and the offsets of each item in it (section `name.at`)."""
        chunks, at, pos = [b"["], [], 1
        for n, item in enumerate(items):
            if n:
                chunks.append(b",")
                pos += 1
            data = _dumps(item)
            at.append(pos)
            chunks.append(data)
            pos += len(data)
        at.append(pos)
        chunks.append(b"]")
        self.parts[name] = b"".join(chunks)
        self.add(name + ".at", at)


def write_store(path: Path, kind: str, key: str, sections: Sections) -> None:
    """The store of `kind` under `key`, written atomically (kb/files.py write_atomic)."""
    ranges, pos = {}, 0
    for name, data in sections.parts.items():
        ranges[name] = [pos, pos + len(data)]
        pos += len(data)
    body = _dumps({"kind": kind, "key": key, "sections": ranges}) + b"\n" + b"".join(sections.parts.values())
    write_atomic(path, MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body)


class Store:
    """A store read back: its sections (byte ranges of `data`), each parsed when asked for."""

    def __init__(self, path: Path, data: bytes, ranges: dict[str, tuple[int, int]]) -> None:
        self.path, self._data, self._ranges = path, data, ranges

    def has(self, name: str) -> bool:
        return name in self._ranges

    def json(self, name: str) -> Any:
        start, end = self._ranges[name]
        return json.loads(self._data[start:end])

    def table(self, name: str) -> Table:
        at = self.json(name + ".at")
        start, end = self._ranges[name]
        if not isinstance(at, list) or (at and (not isinstance(at[0], int) or min(at) < 1 or max(at) >= end - start)):
            raise ValueError(f"section {name}.at: not offsets into {name}")
        return Table(self._data, start, end, at)


class Table(Sequence[Any]):
    """A table's items, each parsed when first read (all at once by `all`)."""

    def __init__(self, blob: bytes, start: int, end: int, at: list[int]) -> None:
        self._blob, self._start, self._end, self._at = blob, start, end, at
        self._items: list[Any] = [None] * (len(at) - 1)
        self._read = [False] * len(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, n: Any) -> Any:
        if isinstance(n, slice):
            return [self[i] for i in range(*n.indices(len(self)))]
        if n < 0:
            n += len(self._items)
        if not self._read[n]:
            a = self._start + self._at[n]
            self._items[n] = json.loads(self._blob[a:self._start + self._at[n + 1] - (n + 1 < len(self._items))])
            self._read[n] = True
        return self._items[n]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.all())

    def all(self) -> list[Any]:
        """Every item (parsed in one go; the ones read before are kept: the same objects)."""
        if not all(self._read):
            every = json.loads(self._blob[self._start:self._end])
            for n, item in enumerate(every):
                if not self._read[n]:
                    self._items[n] = item
                    self._read[n] = True
        return list(self._items)


def read_store(path: Path, kind: str, key: str) -> Optional[Store]:
    """The store at `path`, or None when there is none or it cannot be used (then it is removed,
    so that it is compiled again). KBError when something that is not a file is in its place and
    cannot be removed."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise KBError(f"cannot read the answer store: {e.strerror or e}", str(path)) from None
    if stat.S_ISREG(st.st_mode) and st.st_size <= MAX_STORE_BYTES:
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_STORE_BYTES + 1)
            store = _parsed(path, data, kind, key)
        except (OSError, ValueError, TypeError, KeyError, RecursionError):
            store = None
        if store is not None:
            return store
    discard(path)
    return None


def _parsed(path: Path, data: bytes, kind: str, key: str) -> Optional[Store]:
    first = data.find(b"\n")
    if not data.startswith(MAGIC) or first < 0:
        return None
    if data[len(MAGIC):first] != hashlib.sha256(memoryview(data)[first + 1:]).hexdigest().encode():
        return None  # damaged, truncated, edited
    second = data.find(b"\n", first + 1)
    header = json.loads(data[first + 1:second]) if second >= 0 else None
    if not isinstance(header, dict) or header.get("kind") != kind or header.get("key") != key:
        return None
    base = second + 1  # sections are ranges of what follows the header
    ranges = {}
    for name, span in dict(header["sections"]).items():
        start, end = span
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end <= len(data) - base):
            return None
        ranges[str(name)] = (base + start, base + end)
    return Store(path, data, ranges)


Place = tuple[Path, str]  # where a store is kept, and its key
T = TypeVar("T")


def load_store(place: Optional[Place], kind: str, read: Callable[[Store], T]) -> Optional[T]:
    """What `read` makes of the store at `place`; None when there is none or it is not one kb
    compiled (it is removed: compiled again). `read` raises ValueError, TypeError, KeyError or
    IndexError on sections of another shape."""
    if place is None:
        return None
    store = read_store(place[0], kind, place[1])
    if store is None:
        return None
    try:
        return read(store)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError):
        discard(place[0])
        return None


def save_store(place: Optional[Place], kind: str, sections: Callable[[], Sections]) -> None:
    """Write the store at `place` (nothing without one), then remove the older stores of its release
    and kind (prune_stores); a cache that cannot be written only costs time."""
    if place is not None:
        with contextlib.suppress(OSError, KBError, ValueError):
            write_store(place[0], kind, place[1], sections())
            prune_stores(place[0])


def prune_stores(path: Path, keep: int = KEEP_STORES) -> list[str]:
    """Remove the stores of `path`'s release and kind but the `keep` most recently written (`path`,
    just written, always among them), and temporary files of interrupted writes older than an
    hour; the names removed. Only regular files named as kb names stores, in `path`'s folder
    itself: a folder that is a symbolic link is left alone, and a link in it is never followed
    nor removed. A process reading an older store is not disturbed: read_store reads the whole
    file at once (a file removed while open stays readable on POSIX), and one removed before it
    is opened is compiled again. Without directory file descriptors (Windows) nothing is removed."""
    mine = _STORE_NAME.fullmatch(path.name)
    if mine is None or not (os.scandir in os.supports_fd and os.unlink in os.supports_dir_fd):
        return []
    try:
        fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:  # gone, or a symbolic link
        return []
    try:
        stores: list[tuple[int, str]] = []
        stale: list[str] = []
        now = time.time()
        with os.scandir(fd) as entries:
            for entry in entries:
                store, temp = _STORE_NAME.fullmatch(entry.name), _TEMP_NAME.fullmatch(entry.name)
                if store is None and (temp is None or _STORE_NAME.fullmatch(temp["store"]) is None):
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if not stat.S_ISREG(st.st_mode):
                    continue
                if store is None:
                    if now - st.st_mtime > STALE_TEMP_SECONDS:
                        stale.append(entry.name)
                elif (store["release"], store["kind"]) == (mine["release"], mine["kind"]) and entry.name != path.name:
                    stores.append((st.st_mtime_ns, entry.name))
        stores.sort(reverse=True)
        removed = []
        for name in [name for _, name in stores[max(keep - 1, 0):]] + stale:
            try:
                os.unlink(name, dir_fd=fd)
            except OSError:  # gone already (another kb pruned it), or not ours to remove
                continue
            removed.append(name)
        return sorted(removed)
    finally:
        os.close(fd)


def discard(path: Path, what: str = "answer store") -> None:
    """Remove what is at `path` (a damaged cached `what`, or anything else in its place)."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    except OSError as e:
        raise KBError(f"cannot replace the damaged {what}: {e.strerror or e}", str(path)) from None


def package_digest() -> str:
    """Of every file of kb's package (its code and the data it ships, such as the wordings)."""
    return _digest(PACKAGE_DIR, skip="__pycache__")


def folder_digest(folder: Path) -> str:
    """Of every file under `folder` (the curated entries): its path and bytes."""
    try:
        return _digest(folder)
    except OSError as e:
        raise KBError(f"cannot read the curated entries: {e.strerror or e}", str(folder)) from None


def _digest(folder: Path, skip: str = "") -> str:
    """Of each regular file's path (from `folder`, `/` between parts) and bytes, in path order;
    folders named `skip` are left out. os.walk: a walk with pathlib takes as long as the reading."""
    files = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if d != skip]
        rel = os.path.relpath(root, folder).replace(os.sep, "/")
        files += [(name if rel == "." else f"{rel}/{name}", os.path.join(root, name)) for name in names]
    h = hashlib.sha256()
    for rel, path in sorted(files):
        if os.path.isfile(path):
            with open(path, "rb") as f:
                h.update(rel.encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()


def store_key(wheel: Path, errors: Path, include_vendored: bool) -> str:
    """The key of the stores of a release wheel, with these curated entries and this kb."""
    st = wheel.stat()
    return hashlib.sha256(json.dumps([MAGIC.decode(), package_digest(), wheel.name, st.st_size, st.st_mtime_ns,
                                      folder_digest(errors), include_vendored]).encode()).hexdigest()


def store_path(cache: Path, release: str, key: str) -> Path:
    """The stores of a release are this path with their kind as a suffix (`.match`, `.search`)."""
    return cache / "answers" / f"{release}-{key[:32]}"
