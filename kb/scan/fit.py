"""Where a template's literal parts occur in a text, in linear time: a whole message, one inside a
longer text (a placeholder at either end takes only the value next to the literal text), one
cut off at the end; and whether a public report's quote is a template's message."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Optional

from kb.scan.literals import literal_parts, matchable, normalize

# `ValueError: `, `vllm.x.SomeError: `, `ValueError[...]: ` before a message
EXCEPTION = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception)(?:\[[^\]]*\])?: ")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{3,}")
MIN_LITERAL = 8  # templates with less literal text ("TP {x}") only match a whole message, never inside a text


def _anchor_words(parts: list[str]) -> set[str]:
    """Words of the literal parts that stay whole words in any filled message: not the ones
    touching a placeholder (`uint8{dtype}` becomes `uint8bfloat16`)."""
    out: set[str] = set()
    for i, part in enumerate(parts):
        matches = list(_WORD.finditer(part))
        for m in matches:
            glued_left = i > 0 and m.start() == 0
            glued_right = i < len(parts) - 1 and m.end() == len(part)
            if not glued_left and not glued_right:
                out.add(m.group())
    return out


def _cut_inside(tail: str, literal: str) -> tuple[int, int]:
    """A message cut inside `literal`, perhaps followed by other text: where in `tail` (after a
    value of at least one character) the longest start of `literal` begins, and its length;
    (len(tail), 0) when none does. Found by bisection: a start that occurs has shorter starts
    that occur too."""
    low, high = 0, len(literal)  # literal[:low] occurs; literal[:high + 1] does not
    while low < high:
        mid = (low + high + 1) // 2
        if tail.find(literal[:mid], 1) >= 0:
            low = mid
        else:
            high = mid - 1
    return (tail.find(literal[:low], 1), low) if low else (len(tail), 0)


_OPEN = {"[": "]", "(": ")", "{": "}", "'": "'", '"': '"'}
_CLOSE = {v: k for k, v in _OPEN.items()}
_EDGE = "`*'\".,;:()[]{} "


def _bracketed(text: str, opener: str, closer: str) -> int:
    """The end of the bracketed value at the start of `text` (its closer counted with nesting),
    or -1 when it does not close."""
    depth = 0
    for i, ch in enumerate(text):
        if ch == closer and (depth > 0 or opener == closer) and i > 0:
            depth -= 1
            if depth <= 0:
                return i + 1
        elif ch == opener:
            depth += 1
    return -1


def _lead_value(before: str) -> str:
    """The value of a placeholder that starts a template found inside a longer text: the word
    (or bracketed value) just before the literal text, not the log text before it."""
    if before[-1:] in _CLOSE:
        end = _bracketed(before[::-1], before[-1], _CLOSE[before[-1]])
        if end > 0:
            return before[len(before) - end:]
    word = before.rsplit(None, 1)[-1] if before.strip() else ""
    return word.strip(_EDGE)


_SPACE = " \t\n\r\f\v"
_MAX_LEAD = 4096  # characters of a value a cut-off message may begin with (a long list; not a whole log line)


def _lead_end(message: str) -> int:
    """How far the value a message begins with reaches, with the spaces after it: a bracketed
    or quoted value, else a run of other characters than spaces (one value, as `_lead_value`
    takes it; the literal text after it begins there at the latest)."""
    end = 0
    if message[:1] in _OPEN:
        end = max(0, _bracketed(message, message[0], _OPEN[message[0]]))
    while end < len(message) and message[end] not in _SPACE:
        end += 1
    while end < len(message) and message[end] in _SPACE:
        end += 1
    return end


def _trail_value(after: str) -> str:
    """The value of a placeholder that ends a template found inside a longer text: a bracketed
    or quoted value, else the word after the literal text, not the text that follows."""
    after = after.lstrip()
    if after[:1] in _OPEN:
        end = _bracketed(after, after[0], _OPEN[after[0]])
        if end > 0:
            return after[:end]
    word = after.split(None, 1)[0] if after.strip() else ""
    return word.strip(_EDGE)


def _balanced(value: str) -> bool:
    return all(value.count(o) == value.count(c) for o, c in ("[]", "()", "{}")) and value.count("'") % 2 == 0 \
        and value.count('"') % 2 == 0


def _clean_edges(parts: Sequence[str], values: Sequence[str]) -> bool:
    """Whether the values of placeholders at the ends of a whole-message match hold only a
    value: the word or bracketed value before the first literal part, and a balanced value
    after the last one (no log text, wrapper or half a JSON object around the message)."""
    if not values:
        return True
    if parts[0] == "" and _lead_value(values[0]) != values[0].strip():
        return False
    return parts[-1] != "" or _balanced(values[-1])


def contained(parts: Sequence[str], text: str) -> Optional[tuple[list[str], int]]:
    """A template inside a longer text (its final period may be missing). A placeholder at
    either end takes only the word or bracketed value next to the literal text."""
    tries = [list(parts)]
    if parts[-1].endswith("."):
        tries.append([*parts[:-1], parts[-1][:-1]])
    for p in tries:
        lead, trail = p[0] == "", p[-1] == ""
        core = p[1 if lead else 0: len(p) - 1 if trail else len(p)]
        if trail and core:  # "... of {n}. {suggestion}" raised with an empty suggestion ends at "."
            core = [*core[:-1], core[-1].rstrip()]
        if not core or not core[0]:
            continue
        found = fit(core, text, start=False, end=False)
        if found is None:
            continue
        values, pos = found
        if lead:
            first = _lead_value(text[: text.find(core[0])])
            if not first:
                continue
            values = [first, *values]
        if trail:  # the value after the literal text; empty when the text ends there
            last = _trail_value(text[pos:])
            if not last and text[pos:].strip():
                continue
            values = [*values, last]
        return values, pos
    return None


MIN_QUOTED = 12  # literal characters a cut-off quote must keep, and at least half the template's


def quotable(template: str) -> bool:
    """Whether a quote can be told to be this template's message: it has words of its own, at
    least MIN_LITERAL characters (`Bad {x}` is the start of too many lines)."""
    parts, _ = literal_parts(template)
    return matchable(parts) and sum(len(p.strip()) for p in parts) >= MIN_LITERAL


def quotes_template(template: str, quote: str) -> bool:
    """Whether `quote` (a line a public report quotes, maybe after `ValueError: `, maybe cut off
    after one of the template's values) is this template's message. Linear time (`fit`)."""
    if not quotable(template):
        return False
    parts, _ = literal_parts(template)
    text = normalize(quote.strip())
    texts = [text, EXCEPTION.sub("", text, count=1)]
    literal = sum(len(p) for p in parts)
    tries = [parts]
    for k in range(len(parts) - 1, 0, -1):  # cut off after the value that follows parts[k - 1]
        kept = sum(len(p) for p in parts[:k])
        if kept < max(MIN_QUOTED, literal / 2):
            break
        tries.append([*parts[:k], ""])
    return any(contained(p, t) is not None for p in tries for t in texts)


def fit(parts: Sequence[str], text: str, start: bool, end: bool) -> Optional[tuple[list[str], int]]:
    """Where a template's literal `parts` occur in `text`, each two apart by a value of at least
    one character: the values, and where the last part ends. `start`/`end`: anchored at the
    text's start/end. Each part is taken at its leftmost place after the one before, which is
    what a regular expression with lazy groups finds, but in linear time: no backtracking."""
    first = parts[0]
    if start:
        if not text.startswith(first):
            return None
        pos = len(first)
    else:
        pos = text.find(first)
        if pos < 0:
            return None
        pos += len(first)
    middle = list(parts[1:])
    if not middle:
        return ([], pos) if not end or pos == len(text) else None
    limit = len(text)
    if end:
        if not text.endswith(middle[-1]):
            return None
        limit -= len(middle[-1])
        middle = middle[:-1]
    values: list[str] = []
    for p in middle:
        i = text.find(p, pos + 1, limit - 1 if end else limit)
        if i < 0:
            return None
        values.append(text[pos:i])
        pos = i + len(p)
    if end:
        if limit - pos < 1:
            return None
        values.append(text[pos:limit])
        pos = len(text)
    return values, pos
