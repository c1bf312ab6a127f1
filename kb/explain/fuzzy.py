"""Edited wording: a message aligned word by word with a template, with a few edits (dynamic
programming), and what differs said in words. `Matcher.probably` uses it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Optional

_TOKEN = re.compile(r"[A-Za-z0-9_]+|[^\sA-Za-z0-9_]")
FUZZY_MAX_TOKENS = 160  # longer messages are not aligned (an edited message is a sentence or two)
FUZZY_CANDIDATES = 6  # templates aligned, those sharing most words with the message
FUZZY_MIN_WORDS = 0.5  # the share of words a template must share with the message to be aligned
FUZZY_MIN_TOKENS = 6  # literal words and signs a template needs to be told apart by alignment
FUZZY_EDITS = 0.0  # the share of the template's weight that may differ: bench/fuzzy.py shows that any
# edit (a word, a sign) already names a sibling error for some unknown messages, so the lookup
# says "probably" only for the same words and signs, spaced, cased or wrapped differently
WORD_COST, SIGN_COST = 4, 1  # a word changed, added or left out weighs four signs (a bracket, a period)


_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _weight(token: str) -> int:
    """What an edit of this token costs: a word four, a sign (a bracket, a period) one."""
    return WORD_COST if token[0] in _WORD_CHARS else SIGN_COST


def _tokens(text: str, limit: Optional[int] = None) -> list[tuple[str, int, int]]:
    """The words and signs of `text` in lower case, with where each is; at most `limit` of
    them (a megabyte of dots would otherwise be a megabyte of tuples)."""
    out: list[tuple[str, int, int]] = []
    for m in _TOKEN.finditer(text):
        if limit is not None and len(out) >= limit:
            break
        out.append((m.group().lower(), m.start(), m.end()))
    return out


def _template_tokens(entry: dict[str, Any]) -> list[Optional[str]]:
    """The template as words and signs in lower case, None for each placeholder."""
    out: list[Optional[str]] = []
    for i, part in enumerate(entry["parts"]):
        out += [t.lower() for t in _TOKEN.findall(part)]
        if i < len(entry["names"]):
            out.append(None)
    return out


def align(template: Sequence[Optional[str]], message: Sequence[str]) -> tuple[int, list[tuple[str, int, int]]]:
    """The fewest edits (a word changed, added or left out) that turn a stretch of `message`
    into `template`, whose None tokens (placeholders) take one or more message tokens for free
    (a word replaced by an unrelated one costs as much as one left out and one added);
    and the steps, in order: ("=", i, j) a word kept (twice for a word split in two by a wrap),
    ("~", i, j) changed, ("+", i, -1) a message word added, ("-", -1, j) a template word left
    out, ("v", i, j) a value. Dynamic programming
    over len(template) x len(message) cells; the whole message is aligned."""
    n, m = len(message), len(template)
    weight = [WORD_COST if t is None else _weight(t) for t in template]
    added = [_weight(w) for w in message]
    cost = [[0] * (m + 1) for _ in range(n + 1)]
    step = [[""] * (m + 1) for _ in range(n + 1)]
    for j in range(1, m + 1):
        cost[0][j] = cost[0][j - 1] + weight[j - 1]
        step[0][j] = "-"
    for i in range(1, n + 1):
        word = message[i - 1]
        row, up = cost[i], cost[i - 1]
        srow = step[i]
        row[0] = up[0] + added[i - 1]  # the whole message is aligned: no text before or after it
        srow[0] = "+"
        for j in range(1, m + 1):
            t = template[j - 1]
            if t is None:  # a value: this token, and perhaps the ones before it
                best, how = up[j - 1], "v"
                if up[j] < best and step[i - 1][j] in ("v", "w"):
                    best, how = up[j], "w"
            else:
                if word == t:
                    best, how = up[j - 1], "="
                elif i > 1 and message[i - 2] + word == t:  # a word split by a wrap: "tok" "ens"
                    best, how = cost[i - 2][j - 1], "2"
                elif _close(word, t):  # a typo or a changed ending: one edit
                    best, how = up[j - 1] + max(weight[j - 1], added[i - 1]), "~"
                else:  # another word: as much as leaving one out and adding the other
                    best, how = up[j - 1] + weight[j - 1] + added[i - 1], "~"
                if up[j] + added[i - 1] < best:
                    best, how = up[j] + added[i - 1], "+"
            if row[j - 1] + weight[j - 1] < best:
                best, how = row[j - 1] + weight[j - 1], "-"
            row[j] = best
            srow[j] = how
    end = n
    steps: list[tuple[str, int, int]] = []
    i, j = end, m
    while j > 0 or i > 0:
        how = step[i][j]
        if how in ("=", "~", "v"):
            steps.append(("v" if how == "v" else how, i - 1, j - 1))
            i, j = i - 1, j - 1
        elif how == "2":
            steps += [("=", i - 1, j - 1), ("=", i - 2, j - 1)]
            i, j = i - 2, j - 1
        elif how == "w":
            steps.append(("v", i - 1, j - 1))
            i -= 1
        elif how == "+":
            steps.append(("+", i - 1, -1))
            i -= 1
        else:
            steps.append(("-", -1, j - 1))
            j -= 1
    steps.reverse()
    return cost[end][m], steps


def _close(a: str, b: str) -> bool:
    """Two spellings of one word: at most a third of the longer one edited (Levenshtein)."""
    if abs(len(a) - len(b)) * 3 > max(len(a), len(b)):
        return False
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1] * 3 <= max(len(a), len(b))


def differences(template: Sequence[Optional[str]], message: Sequence[tuple[str, int, int]], text: str,
                steps: Sequence[tuple[str, int, int]]) -> list[str]:
    """What differs, in words: `"a" instead of "b"`, `added "c"`, `without "d"` (runs of one kind joined)."""
    out: list[str] = []
    run: list[tuple[str, int, int]] = []

    def flush() -> None:
        if not run:
            return
        kind = run[0][0]
        said = text[message[run[0][1]][1]: message[run[-1][1]][2]] if kind in "~+" else ""
        wanted = " ".join(str(template[s[2]]) for s in run) if kind in "~-" else ""
        out.append(f'"{said}" instead of "{wanted}"' if kind == "~" else f'added "{said}"' if kind == "+"
                   else f'without "{wanted}"')
        run.clear()

    for s in steps:
        if s[0] in "~+-" and (not run or run[0][0] == s[0]):
            run.append(s)
            continue
        flush()
        if s[0] in "~+-":
            run.append(s)
    flush()
    return out


def _aligned_values(names: Sequence[str], template: Sequence[Optional[str]], steps: Sequence[tuple[str, int, int]],
                    tokens: Sequence[tuple[str, int, int]], text: str) -> tuple[tuple[str, str], ...]:
    """The message text each placeholder took in an alignment (the k-th None of the template is
    the k-th name)."""
    spans: dict[int, tuple[int, int]] = {}
    for kind, i, j in steps:
        if kind == "v":
            a, b = spans.get(j, (tokens[i][1], tokens[i][2]))
            spans[j] = (min(a, tokens[i][1]), max(b, tokens[i][2]))
    holes = [j for j, t in enumerate(template) if t is None]
    return tuple((name, text[spans[j][0]:spans[j][1]]) for name, j in zip(names, holes) if j in spans)
