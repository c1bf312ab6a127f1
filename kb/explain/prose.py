"""Prose as a terminal shows it (`kb explain`, `kb search`): plain text without Markdown (what a
page shows of it: kb/entries/plain.py), cut only at the end of a sentence, else of a word, and
then marked with "…" so that the reader knows to read on at the page."""

from __future__ import annotations

import re

from kb.entries.sentences import sentence_ends

FIX_CHARS = 400  # the first fix as `kb explain` prints it (the match index's meaning is cut at 400 too)
PREVIEW_CHARS = 160  # what `kb search` prints under a result: about a sentence
ELLIPSIS = "…"
_CODE = re.compile(r"`([^`\n]+)`")  # a code span with no backtick in it
# what Markdown may read as markup, outside such code spans: then the Markdown renderer reads it
_MARKUP = re.compile(r"[`*_\[\]<>&\\#]|^\s*(?:[-+*]|\d+[.)])\s", re.MULTILINE)
_SPACE = re.compile(r"\s+")
_TRAILING = " ,;:-–—(\"'“‘[{"


def fix_text(markdown: str, limit: int = FIX_CHARS) -> tuple[str, bool]:
    """A curated or derived fix (Markdown) as plain text of at most `limit` characters and its
    "…", and whether it was cut."""
    fast = plain_or_none(markdown)
    if fast is not None:
        return lead(fast, limit)
    from kb.entries.plain import plain_text, preview

    text = plain_text(markdown)
    return (text, False) if len(text) <= limit else (preview(markdown, limit), True)


def plain_or_none(markdown: str) -> str | None:
    """What kb/entries/plain.py `plain_text` makes of prose whose only markup is code spans (most
    fixes: tests/test_explain_terminal.py compares the two on every shipped entry), without the
    Markdown renderer (about 60 ms to set up); None for anything else."""
    if _MARKUP.search(_CODE.sub("x", markdown)):
        return None
    return _SPACE.sub(" ", _CODE.sub(lambda m: m.group(1), markdown)).strip()


def lead(text: str, limit: int) -> tuple[str, bool]:
    """Plain text (the match index's meaning, already plain) cut to at most `limit` characters
    and its "…": whole sentences when they fill half of it, else whole words. Whether it is cut:
    here, or before (it ends with "…")."""
    text = text.strip()
    if len(text.removesuffix(ELLIPSIS).rstrip()) <= limit:  # the mark of an earlier cut aside
        return text, text.endswith(ELLIPSIS)
    ends = list(sentence_ends(text, limit))  # kb/entries/sentences.py: one rule for every cut
    if ends and ends[-1] >= limit // 2:
        return text[: ends[-1]] + " " + ELLIPSIS, True
    cut = text.rfind(" ", 0, limit)
    if cut <= 0:  # one word longer than the limit: kept whole
        cut = text.find(" ", limit)
        if cut < 0:
            return text, text.endswith(ELLIPSIS)
    return text[:cut].rstrip(_TRAILING) + ELLIPSIS, True
