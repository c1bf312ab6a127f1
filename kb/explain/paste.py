"""What `kb explain` reads from a pipe: bytes in any encoding or none, made text in bounded
memory. Invalid UTF-8 never fails: it becomes U+FFFD."""

from __future__ import annotations

from collections import deque
from typing import BinaryIO, TextIO

MAX_PASTE_BYTES = 64 * 1024 * 1024  # a long server log; the error that stopped it is at its end
_CHUNK = 1024 * 1024


def read_paste(stream: BinaryIO | TextIO, limit: int = MAX_PASTE_BYTES) -> tuple[str, int]:
    """The text of `stream`, at most its last `limit` bytes (kept while reading: memory stays
    bounded however long the input), and `limit` when the input was cut there, else 0."""
    tail: deque[bytes] = deque()
    size = 0
    cut = False
    while True:
        chunk = stream.read(_CHUNK)
        if not chunk:
            break
        data = chunk.encode("utf-8", "surrogateescape") if isinstance(chunk, str) else chunk
        tail.append(data)
        size += len(data)
        while size - len(tail[0]) >= limit:
            size -= len(tail.popleft())
            cut = True
    data = b"".join(tail)
    if len(data) > limit:
        data = data[len(data) - limit:]
        cut = True
    if cut:  # start at a whole line
        newline = data.find(b"\n")
        data = data[newline + 1:] if 0 <= newline < len(data) - 1 else data
    return data.decode("utf-8", "replace"), limit if cut else 0

