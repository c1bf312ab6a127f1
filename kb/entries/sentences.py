"""Where a sentence ends: the one rule behind every cut "at the end of a sentence" (the previews of
what an error means and of its first fix, `kb explain`'s and `kb search`'s text, the home page's
gists, an error's title from its message).

A sentence ends at `.`, `!` or `?` (and any closing quotes or brackets after it) before a space
or the end of the text, unless what follows the space is a small lower-case word ("etc. and",
"model. vs"; `max_model_len is` starts a sentence: plain text has lost its backticks). Never
an end: the dots of an ellipsis ("..."; "…" is no end mark at all), an abbreviation ("e.g.",
"i.e.", "vs.", "cf.", ...), a dot inside a word or number ("config.json", "0.34.0"). With
`code_spans`, marks inside backtick code spans are not ends either (Markdown prose)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Optional

ABBREVIATIONS = frozenset({"e.g", "i.e", "vs", "cf", "viz", "approx", "incl", "resp", "esp", "w.r.t"})
_MARK = re.compile(r"[.!?`]")
_CLOSERS = "\"')]”’"
_WORD_BEFORE = re.compile(r"([A-Za-z][A-Za-z.]*)$")
_WORD = re.compile(r"[a-z]+\b")
_SMALL_WORDS = frozenset({"a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "from", "if", "in", "into", "is",
                          "it", "not", "of", "on", "or", "so", "than", "that", "the", "then", "to", "vs", "was", "were",
                          "when", "which", "while", "with"})


def sentence_ends(text: str, stop: Optional[int] = None, code_spans: bool = False) -> Iterator[int]:
    """The offset just past each sentence end in `text` (its mark and closers; the space after it
    is not included), in order, up to those at `stop` or before."""
    limit = len(text) if stop is None else min(stop, len(text))
    code = False
    for m in _MARK.finditer(text, 0, limit):
        i = m.start()
        if text[i] == "`":
            code = code_spans and not code
            continue
        if code:
            continue
        end = i + 1
        while end < len(text) and text[end] in _CLOSERS:
            end += 1
        if end > limit:
            break
        if _ends(text, i, end):
            yield end


def _ends(text: str, i: int, end: int) -> bool:
    if end < len(text) and not text[end].isspace():
        return False  # inside a word, a number or a path
    if text[i] == "." and not _ends_dots(text, i):
        return False
    after = end
    while after < len(text) and text[after].isspace():
        after += 1
    if after < len(text) and not _starts(text, after):
        return False  # "etc. and", "(model.language_model. vs language_model.)"
    if text[i] == ".":  # the word before it, whole (the longest abbreviation has 6 characters)
        word = _WORD_BEFORE.search(text, max(0, i - 10), i)
        if word and not text[word.start() - 1:word.start()].isalpha() and word.group(1).lower() in ABBREVIATIONS:
            return False
    return True


def _ends_dots(text: str, i: int) -> bool:
    """A lone dot, or the fourth of an ellipsis and a full stop ("host2 ...."); not "..."."""
    first, last = i, i
    while first and text[first - 1] == ".":
        first -= 1
    while last + 1 < len(text) and text[last + 1] == ".":
        last += 1
    return first == last or (last - first >= 3 and i == last)


def _starts(text: str, at: int) -> bool:
    """Whether a sentence may start at `at`: not with a lower-case small word ("etc. and", "vs");
    any other word may (`max_model_len is ...`, `soundfile handles ...`: prose shown as plain
    text has lost its backticks)."""
    word = _WORD.match(text, at)
    return not (word and word.group(0) in _SMALL_WORDS)


def first_sentence_end(text: str, stop: Optional[int] = None, code_spans: bool = False) -> int:
    """The offset just past the first sentence's end, or -1 when none ends by `stop`."""
    return next(sentence_ends(text, stop, code_spans), -1)
