"""Which characters a regular expression can start a match with, read from `re`'s own parse of it:
a test of one character that may say yes wrongly (anything not understood is "any character")
but never no wrongly. kb/site/lexer.py tries at a position only the rules that can match there."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

Test = Callable[[str], bool]


def _any(c: str) -> bool:
    return True


_CATEGORIES = {sre.CATEGORY_DIGIT: r"\d", sre.CATEGORY_NOT_DIGIT: r"\D", sre.CATEGORY_SPACE: r"\s",
               sre.CATEGORY_NOT_SPACE: r"\S", sre.CATEGORY_WORD: r"\w", sre.CATEGORY_NOT_WORD: r"\W"}
_REPEATS = (sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", sre.MAX_REPEAT))
_ZERO_WIDTH = (sre.AT, sre.ASSERT, sre.ASSERT_NOT)


class _Unknown(Exception):
    pass


def first_test(pattern: re.Pattern[str]) -> Test:
    """c -> False only when no match of `pattern` can start with the character c (nor be empty)."""
    try:
        tests, nullable = _seq(sre_parse.parse(pattern.pattern, pattern.flags).data, pattern.flags)
    except (_Unknown, re.error, RecursionError):
        return _any
    if nullable or _case_sensitive(pattern) is None:
        return _any
    if not _case_sensitive(pattern):  # IGNORECASE: ASCII letters in either case; other characters, any
        return lambda c: not c.isascii() or any(t(x) for x in (c, c.lower(), c.upper()) for t in tests)
    return lambda c: any(t(c) for t in tests)


def _case_sensitive(pattern: re.Pattern[str]) -> bool | None:
    """True without IGNORECASE; False with it for the whole pattern; None when a part sets it."""
    if pattern.flags & re.IGNORECASE:
        return False
    return None if re.search(r"\(\?[aLmsux]*i", pattern.pattern) else True


def _seq(items: Sequence[tuple[Any, Any]], flags: int) -> tuple[list[Test], bool]:
    """The tests of a sequence's first character, and whether it can match empty."""
    tests: list[Test] = []
    for op, av in items:
        if op in _ZERO_WIDTH:
            continue  # consumes nothing: the next item starts the match (a lookahead only narrows it)
        got, nullable = _item(op, av, flags)
        tests += got
        if not nullable:
            return tests, False
    return tests, True


def _item(op: Any, av: Any, flags: int) -> tuple[list[Test], bool]:
    if op is sre.LITERAL:
        ch = chr(av)
        return [ch.__eq__], False
    if op is sre.IN:
        return [_charset(av, flags)], False
    if op is sre.SUBPATTERN:
        return _seq(av[3].data if hasattr(av[3], "data") else av[3], flags)
    if op is sre.BRANCH:
        tests: list[Test] = []
        nullable = False
        for alternative in av[1]:
            got, empty = _seq(alternative.data if hasattr(alternative, "data") else alternative, flags)
            tests += got
            nullable = nullable or empty
        return tests, nullable
    if op in _REPEATS:
        got, empty = _seq(av[2].data if hasattr(av[2], "data") else av[2], flags)
        return got, empty or av[0] == 0
    if op is getattr(sre, "ATOMIC_GROUP", None):
        return _seq(av.data if hasattr(av, "data") else av, flags)
    raise _Unknown(op)


def _charset(items: Sequence[tuple[Any, Any]], flags: int) -> Test:
    negate = bool(items) and items[0][0] is sre.NEGATE
    tests: list[Test] = []
    for op, av in items[1:] if negate else items:
        if op is sre.LITERAL:
            tests.append(chr(av).__eq__)
        elif op is sre.RANGE:
            tests.append(_range(*av))
        elif op is sre.CATEGORY and av in _CATEGORIES:
            tests.append(_category(_CATEGORIES[av], flags))
        else:
            raise _Unknown(op)
    if negate:
        return lambda c: not any(t(c) for t in tests)
    return lambda c: any(t(c) for t in tests)


def _range(lo: int, hi: int) -> Test:
    return lambda c: lo <= ord(c) <= hi


def _category(text: str, flags: int) -> Test:
    match = re.compile(text, flags & (re.ASCII | re.UNICODE)).match
    return lambda c: match(c) is not None
