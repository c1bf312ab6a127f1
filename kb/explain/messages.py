"""A paste -> the messages it holds, each unwrapped from what users paste around it (log
prefixes, ANSI colours, `ValueError: `, pydantic's wrapper), and the clues it gives of where its
error was raised: the vLLM files a traceback passes through, the releases it names."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kb.explain.index import normalize, unescaped

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
LOG_PREFIX = re.compile(r"^(?:\(\w+(?: pid=\d+)?\)\s+)?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+"
                        r"\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?\s+\[[^\]]*\]\s?")
PYDANTIC = re.compile(r"Value error, (.*?)(?: \[type=value_error\b.*)?$")
EXCEPTION = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception)(?:\[[^\]]*\])?: ")
# `SomeError: ` (or `RayTaskError(ValueError): `) anywhere after prose (in any script: `遇到了ValueError: `),
# a title tag such as `[Bug]: `, a quote or a code span: the message is what follows the last one.
EXCEPTION_MARK = re.compile(r"(?<![A-Za-z0-9_.])(?:[A-Za-z0-9_]+\.)*[A-Za-z0-9_]*(?:Error|Exception)"
                            r"(?:\([A-Za-z0-9_.]*\))?(?:\[[^\]]*\])?: ")
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


_TRACEBACK_FILE = re.compile(r'File "[^"\n]*?/(vllm/[^"\n]+\.py)"')


# "vllm==0.5.5", "vllm 0.4.0.post1", "vLLM Version: 0.6.3", "vllm/vllm-openai:v0.8.5", "vLLM API server
# version 0.8.5": the word vllm, up to 30 characters without a digit on the same line, a version
_RELEASE = re.compile(r"\bvllm\b[^\n\d]{0,30}?\bv?(\d+)\.(\d+)\.\d+", re.IGNORECASE | re.ASCII)


def clues_of(text: str) -> Clues:
    """The vLLM files a traceback in the text passes through and the releases it names."""
    text = unescaped(text)
    return Clues(frozenset(_TRACEBACK_FILE.findall(text)),
                 frozenset((int(a), int(b)) for a, b in _RELEASE.findall(text)))


def unwrap(message: str, fold: bool = False) -> str:
    """The message inside what users paste around it."""
    m = PYDANTIC.search(message)
    if m:
        message = m.group(1)
    marks = list((EXCEPTION_MARK_FOLD if fold else EXCEPTION_MARK).finditer(message))
    if marks:
        message = message[marks[-1].end():]
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
    text = ANSI.sub("", unescaped(text.replace("\r\n", "\n").replace("\r", "\n")))
    out: list[tuple[int, list[str]]] = []
    fresh = True  # the next line starts a message (after a blank line, or at the start)
    for n, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            fresh = True
            continue
        line, had_prefix = LOG_PREFIX.subn("", raw, count=1)
        if fresh or had_prefix or _STARTS.match(raw) or EXCEPTION.match(line.strip()):
            out.append((n, [line]))
        else:
            out[-1][1].append(line)
        fresh = False
    return [(n, normalize(" ".join(lines)).strip()) for n, lines in out if "".join(lines).strip()]
