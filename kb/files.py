"""How kb writes what is not part of a site build: whole files at once, and compact JSON."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import stat
import tempfile
import zlib
from pathlib import Path
from typing import Any

from kb.errors import KBError


def compact_json(obj: Any) -> str:
    """Compact and deterministic (C encoder: indenting would be 8x slower over 4,000 records)."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"


GZIP_MAGIC = b"\x1f\x8b"


def gzip_text(text: str) -> bytes:
    """Deterministic gzip of UTF-8 text: no file name and no time in the header, so the same
    text gives the same bytes."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", filename="", mtime=0, compresslevel=9) as f:
        f.write(text.encode("utf-8"))
    return buffer.getvalue()


def read_text(path: Path, limit: int) -> str:
    """A UTF-8 file, gzipped or not (told by its first bytes, not its name: a host may have
    unpacked it already), at most `limit` bytes unpacked. Raises OSError (a file larger than
    `limit`, a damaged gzip stream, not a regular file: a FIFO would never end) or
    UnicodeDecodeError; FileNotFoundError when it is missing, unless `path` is `X.gz` and `X` is
    there: the file of a site an older kb built, which is said."""
    if not path.is_file():
        if path.exists():
            raise OSError("not a regular file")
        if path.suffix == ".gz" and path.with_suffix("").is_file():
            raise OSError(f"missing; {path.with_suffix('').name} is there: a site an older kb built, build it again")
    with open(path, "rb") as f:
        head = f.read(2)
        f.seek(0)
        if head == GZIP_MAGIC:
            with gzip.GzipFile(fileobj=f, mode="rb") as z:
                try:
                    data = z.read(limit + 1)
                except (EOFError, gzip.BadGzipFile, zlib.error) as e:
                    raise OSError(f"a damaged gzip stream ({e})") from None
        else:
            data = f.read(limit + 1)
    if len(data) > limit:
        raise OSError(f"larger than {limit // 2**20} MB")
    return data.decode("utf-8")


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write `data` (text as UTF-8) to `path` via a temporary file beside it: never a
    half-written file. Only a regular file (or nothing) is replaced: a symbolic link, a FIFO, a
    device or a folder at `path` is refused (KBError), never renamed over."""
    kind = _special(path)
    if kind is not None:
        raise KBError(f"{kind}: kb writes only a regular file here (name the file itself, or `-` for "
                      "standard output)", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _special(path: Path) -> str | None:
    """What `path` is when it is neither a regular file nor absent (None: one of those)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot be examined ({e.strerror or e})"
    if stat.S_ISREG(mode):
        return None
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
