"""A paste -> the messages it holds, each unwrapped from what users paste around it (log
prefixes, ANSI colours, `ValueError: `, pydantic's wrapper), and the clues it gives of where its
error was raised: the vLLM files a traceback passes through, the releases it names."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Optional

from kb.scan.fit import EXCEPTION
from kb.scan.literals import normalize, unescaped

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
LOG_PREFIX = re.compile(r"^(?:\(\w+(?: pid=\d+)?\)\s+)?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+"
                        r"\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?\s+\[[^\]]*\]\s?")
PYDANTIC = re.compile(r"Value error, (.*?)(?: \[type=value_error\b.*)?$")
# `SomeError: ` (or `RayTaskError(ValueError): `) anywhere after prose (in any script: `遇到了ValueError: `),
# a title tag such as `[Bug]: `, a quote or a code span: the message is what follows the last one.
# A dotted name (no leading or doubled dot) written with one character class, not a repeated group,
# and a bracket that holds no other `[`: every search then runs in memory and time linear in the text.
EXCEPTION_MARK = re.compile(r"(?<![A-Za-z0-9_.])(?!\.)(?![A-Za-z0-9_.]*\.\.)[A-Za-z0-9_.]*(?:Error|Exception)"
                            r"(?:\([A-Za-z0-9_.]*\))?(?:\[[^\][]*\])?: ")
EXCEPTION_MARK_FOLD = re.compile(EXCEPTION_MARK.pattern, re.IGNORECASE)  # in a lower-cased paste
_WRAPPING = "`*'\""
_STARTS = re.compile(r"^(?:Traceback \(most recent call last\):|\s*File \"|During handling|The above exception)")


@dataclass(frozen=True)
class Clues:
    """What a paste tells of where its error was raised: the vLLM files its traceback passes
    through, and the vLLM releases it names (`vllm==0.5.5`, `vLLM API server version 0.8.5`), as
    (major, minor): kb has one release per minor."""

    files: frozenset[str] = frozenset()
    minors: frozenset[tuple[int, int]] = frozenset()


NO_CLUES = Clues()


# The quoted path after each `File "` (a lookahead: a quote inside one path can start the next);
# the `vllm/...py` in it is found with str.find, linear however many `/vllm/` one line holds.
_TRACEBACK_PATH = re.compile(r'File "(?=([^"\n]*)")')


# "vllm==0.5.5", "vllm 0.4.0.post1", "vLLM Version: 0.6.3", "vllm/vllm-openai:v0.8.5", "vLLM API server
# version 0.8.5": the word vllm, up to 30 characters without a digit on the same line, a version
_RELEASE = re.compile(r"\bvllm\b[^\n\d]{0,30}?\bv?(\d+)\.(\d+)\.\d+", re.IGNORECASE | re.ASCII)


def clues_of(text: str) -> Clues:
    """The vLLM files a traceback in the text passes through and the releases it names."""
    files: set[str] = set()
    minors: set[tuple[int, int]] = set()
    for chunk in _chunks(text, unescaped):  # neither pattern reaches past the end of a line
        files.update(f for f in (_vllm_file(m.group(1)) for m in _TRACEBACK_PATH.finditer(chunk)) if f)
        minors.update((int(m.group(1)), int(m.group(2))) for m in _RELEASE.finditer(chunk))
    return Clues(frozenset(files), frozenset(minors))


def _vllm_file(path: str) -> str:
    """`vllm/x.py` of a traceback's path (from its first `/vllm/`), or ""."""
    at = path.find("/vllm/")
    return path[at + 1:] if at >= 0 and path.endswith(".py") and len(path) - at >= 10 else ""


def unwrap(message: str, fold: bool = False) -> str:
    """The message inside what users paste around it."""
    m = PYDANTIC.search(message)
    if m:
        message = m.group(1)
    last = deque((EXCEPTION_MARK_FOLD if fold else EXCEPTION_MARK).finditer(message), maxlen=1)
    if last:
        message = message[last[0].end():]
    return _unbalanced_edges(message.strip())


def _unbalanced_edges(message: str) -> str:
    """Drop a code span's backtick, an emphasis star or a quote left at either end by what was
    cut around the message; one that pairs with another inside (`got 'x'`) is the message's own."""

    def lone(ch: str) -> bool:
        return ch in _WRAPPING and message.count(ch) % 2 == 1

    while message:
        if lone(message[0]):
            message = message[1:].strip()
        elif lone(message[-1]):
            message = message[:-1].strip()
        else:
            break
    return message


def log_messages(text: str) -> list[tuple[int, str]]:
    """Split a paste or a log into messages: a log line, a traceback line or an exception
    line starts a new one; other lines continue it (messages with newlines in their values)."""
    return list(iter_messages(text))


def iter_messages(text: str, cuts: Optional[list[int]] = None) -> Iterator[tuple[int, str]]:
    """`log_messages` one at a time: a long log is never held as a list of its lines or messages,
    and one message is read up to MAX_MESSAGE characters (a line, or the lines that continue it);
    each line or message cut there adds its line number to `cuts`."""
    lines: list[str] = []  # of the message being read
    size = start = 0  # its characters so far; its line number
    fresh = True  # the next line starts a message (after a blank line, or at the start)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    for n, raw in enumerate(_lines(text, lambda chunk: ANSI.sub("", unescaped(chunk)), cuts), start=1):
        if not raw.strip():
            fresh = True
            continue
        line, had_prefix = LOG_PREFIX.subn("", raw, count=1)
        if fresh or had_prefix or _STARTS.match(raw) or EXCEPTION.match(line.strip()):
            if lines:
                yield from _message(start, lines)
            start, lines, size = n, [line], len(line)
        else:
            if size < MAX_MESSAGE:
                lines.append(line[:MAX_MESSAGE - size])
            size += len(line) + 1
            if size > MAX_MESSAGE and cuts is not None and cuts[-1:] != [start]:
                cuts.append(start)
        fresh = False
    if lines:
        yield from _message(start, lines)


def _message(line: int, lines: list[str]) -> Iterator[tuple[int, str]]:
    if "".join(lines).strip():
        yield line, normalize(" ".join(lines)).strip()


MAX_MESSAGE = 1 << 20  # characters of a line, or of a message, that are read: a vLLM message is a few KB
_CHUNK = MAX_MESSAGE


def _lines(text: str, clean: Callable[[str], str], cuts: Optional[list[int]] = None) -> Iterator[str]:
    """The lines of `text` (split at `\\n`) after `clean`, each cut to its first MAX_MESSAGE characters."""
    for chunk in _chunks(text, clean, cuts):
        yield from chunk.split("\n")


def _chunks(text: str, clean: Callable[[str], str], cuts: Optional[list[int]] = None) -> Iterator[str]:
    """`text` in chunks of whole lines of about MAX_MESSAGE characters, each after `clean` (which
    must keep every `\\n` and join no two lines); a longer line is cut to its first MAX_MESSAGE
    characters (its line number added to `cuts`). C speed, and memory bounded however long the
    text or one line of it."""
    at = 0
    line = 1  # of `at`, counted only for `cuts`
    while True:
        if len(text) - at <= _CHUNK:
            yield clean(text[at:])
            return
        last = text.rfind("\n", at, at + _CHUNK)
        if last < 0:  # one line longer than a chunk
            end = text.find("\n", at + _CHUNK)
            stop = len(text) if end < 0 else end
            if stop - at > MAX_MESSAGE and cuts is not None:
                cuts.append(line)
            yield clean(text[at:min(at + MAX_MESSAGE, stop)])
            if end < 0:
                return
            at, line = end + 1, line + 1
            continue
        yield clean(text[at:last])
        if cuts is not None:
            line += text.count("\n", at, last) + 1
        at = last + 1
