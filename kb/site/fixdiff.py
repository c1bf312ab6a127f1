"""An example fix's before and after as the page shows them: highlighted, with what the fix
changes marked (`<del>` in before, `<ins>` in after) and listed in words. Pure functions.

The two commands are compared as argument lists: a shell command's words (a quoted string is
one word), a flag with its value as one argument (`--node-rank 2`); Python code's arguments
between parentheses and commas (`logprob_token_ids=[-1]`). The text is never changed, so a
command copied from the page is the command as written."""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import cache
from typing import Optional

from markupsafe import Markup, escape
from pygments.lexer import Lexer
from pygments.lexers import BashLexer, PythonLexer
from pygments.token import STANDARD_TYPES, _TokenType

Span = tuple[int, int]  # [start, end) in the text
MAX_CHANGES = 3  # changes listed in words; more (a rewritten program) are only marked
MAX_CHANGE_TEXT = 160  # characters of one listed argument

_NEGATIVE = re.compile(r"-\.?\d")


@dataclass(frozen=True)
class Change:
    """One changed run of arguments: "" on one side for an argument added or removed."""

    before: str
    after: str


@dataclass(frozen=True)
class FixDiff:
    before: tuple[Span, ...]  # the changed arguments of before
    after: tuple[Span, ...]
    changes: tuple[Change, ...]


def units(text: str, language: str = "shell") -> list[Span]:
    """The words of `text`: split at whitespace outside quotes; for Python also at `(`, `)` and
    `,` outside quotes, `[...]` and `{...}`. A quote is closed at the end of its line at the latest."""
    out: list[Span] = []
    python = language == "python"
    start = -1
    quote = ""
    depth = 0
    for i, c in enumerate(text):
        if c == "\n":
            quote, depth = "", 0
        if quote:
            if c == quote and not (python and _escaped(text, i)):
                quote = ""
            continue
        cut = (c.isspace() and not depth) or (python and depth == 0 and c in "(),")
        if cut:
            if start >= 0:
                out.append((start, i))
                start = -1
            continue
        if start < 0:
            start = i
        if c in "'\"":
            quote = c
        elif python and c in "[{":
            depth += 1
        elif python and c in "]}" and depth:
            depth -= 1
    if start >= 0:
        out.append((start, len(text)))
    return out


def _escaped(text: str, i: int) -> bool:
    n = 0
    while i - n - 1 >= 0 and text[i - n - 1] == "\\":
        n += 1
    return n % 2 == 1


def _is_flag(word: str) -> bool:
    return word.startswith("-") and word not in ("-", "--") and not _NEGATIVE.match(word) and "=" not in word


def arguments(text: str, language: str = "shell") -> list[Span]:
    """The words of `text`, a flag and the value after it on the same line as one argument."""
    words = units(text, language)
    out: list[Span] = []
    i = 0
    while i < len(words):
        a, b = words[i]
        if i + 1 < len(words) and _is_flag(text[a:b]):
            c, d = words[i + 1]
            value = text[c:d]
            if (not value.startswith("-") or _NEGATIVE.match(value)) and "\n" not in text[b:c]:
                out.append((a, d))
                i += 2
                continue
        out.append((a, b))
        i += 1
    return out


def fix_diff(before: str, after: str, language: str = "shell") -> FixDiff:
    """The arguments a fix changes: each side's changed arguments and the changes in words."""
    a, b = arguments(before, language), arguments(after, language)
    ta, tb = [before[s:e] for s, e in a], [after[s:e] for s, e in b]
    marks_a: list[Span] = []
    marks_b: list[Span] = []
    changes: list[Change] = []
    for op, i1, i2, j1, j2 in SequenceMatcher(None, ta, tb, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        marks_a += _runs(before, a[i1:i2])
        marks_b += _runs(after, b[j1:j2])
        changes.append(Change(" ".join(ta[i1:i2]), " ".join(tb[j1:j2])))
    return FixDiff(tuple(marks_a), tuple(marks_b), tuple(changes))


def _runs(text: str, spans: list[Span]) -> list[Span]:
    """Adjacent changed arguments as one mark, a line at a time."""
    out: list[Span] = []
    for s, e in spans:
        if out and "\n" not in text[out[-1][1]:s]:
            out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def listed_changes(diff: FixDiff) -> tuple[Change, ...]:
    """The changes worth writing out in words: none for a rewritten program."""
    if len(diff.changes) > MAX_CHANGES or any(len(c.before) > MAX_CHANGE_TEXT or len(c.after) > MAX_CHANGE_TEXT
                                              for c in diff.changes):
        return ()
    return diff.changes


# --- HTML -----------------------------------------------------------------------------------------
@cache
def _lexer(language: str) -> Lexer:
    lexer: Lexer = BashLexer() if language == "shell" else PythonLexer()
    return lexer


def _css_class(ttype: _TokenType) -> str:
    """Pygments' HtmlFormatter's class of a token type (its nearest standard type and the rest)."""
    name = STANDARD_TYPES.get(ttype)
    extra = ""
    kind: Optional[_TokenType] = ttype
    while name is None and kind is not None:
        extra = kind[-1] + extra
        kind = kind.parent
        name = STANDARD_TYPES.get(kind) if kind is not None else ""
    return (name or "") + extra


def _tokens(code: str, language: str) -> list[tuple[str, str]]:
    """(css class, text) covering `code` exactly; one plain token if the lexer would alter it."""
    tokens: list[tuple[str, str]] = []
    for _, ttype, value in _lexer(language).get_tokens_unprocessed(code):
        cls = _css_class(ttype)
        if tokens and tokens[-1][0] == cls:
            tokens[-1] = (cls, tokens[-1][1] + value)
        else:
            tokens.append((cls, value))
    return tokens if "".join(v for _, v in tokens) == code else [("", code)]


def marked_html(code: str, language: str, args: list[Span], marks: tuple[Span, ...], tag: str) -> Markup:
    """`code` highlighted as Pygments' HtmlFormatter(nowrap=True) does; each span of `marks` (runs
    of `args`) in `<tag class="chg">` (tag: del or ins), each argument outside them in a `<span>`.
    Those boxes are `a`: a line breaks between them, not inside one that fits; all but one that
    opens a line, which breaks inside after its indentation rather than leave that line empty."""
    boxes = sorted([*marks, *((s, e) for s, e in args if not any(m <= s and e <= n for m, n in marks))])
    cuts = sorted({0, len(code), *(p for m in boxes for p in m)})
    opens: dict[int, str] = {}
    closes: dict[int, str] = {}
    for s, e in boxes:
        name = tag if (s, e) in marks else "span"
        opens_line = not code[code.rfind("\n", 0, s) + 1:s].strip() and "\n" in code
        cls = " ".join(c for c in ("" if opens_line else "a", "chg" if name == tag else "") if c)
        if cls:
            opens[s], closes[e] = f'<{name} class="{cls}">', f"</{name}>"
    out: list[str] = []
    pos = 0
    for cls_, value in _tokens(code, language):
        end = pos + len(value)
        inner = [p for p in cuts if pos < p < end]
        for a, b in zip([pos, *inner], [*inner, end]):
            if a in opens:
                out.append(opens[a])
            out.append("\n".join(f'<span class="{cls_}">{escape(line)}</span>' if cls_ and line else str(escape(line))
                                 for line in code[a:b].split("\n")))
            if b in closes:
                out.append(closes[b])
        pos = end
    return Markup("".join(out))


@dataclass(frozen=True)
class FixCode:
    """What the template shows of a fix: both sides as HTML and the changes in words."""

    before: Markup
    after: Markup
    changes: tuple[Change, ...]  # listed in words (listed_changes)
    marked: bool  # something is marked (a fix that changes nothing marks nothing)
    single_line: bool  # both sides are one line: wrapped lines hang under the first
    note: Markup  # what is said under the fix of what it changes (change_note)


def fix_code(before: str, after: str, language: str) -> FixCode:
    before, after = before.strip("\n"), after.strip("\n")
    diff = fix_diff(before, after, language)
    changes = listed_changes(diff)
    return FixCode(marked_html(before, language, arguments(before, language), diff.before, "del"),
                   marked_html(after, language, arguments(after, language), diff.after, "ins"),
                   changes, bool(diff.changes), "\n" not in before and "\n" not in after,
                   change_note(changes, bool(diff.changes)))


def change_note(changes: tuple[Change, ...], marked: bool) -> Markup:
    """The line under a fix (the site's page and the MkDocs plugin's): the changes in words, else
    how they are marked; empty when the fix changes nothing."""
    if changes:
        words = [Markup("<code>{}</code> → <code>{}</code>").format(c.before, c.after) if c.before and c.after else
                 Markup("added <code>{}</code>").format(c.after) if c.after else
                 Markup("removed <code>{}</code>").format(c.before) for c in changes]
        return Markup("<strong>Changed:</strong> ") + Markup("; ").join(words) + Markup(".")
    if marked:
        return Markup("What changed is marked: struck out in “before”, underlined in “after”.")
    return Markup()
