"""A template's literal parts as a pasted message is compared with them: white space folded,
escapes undone, two placeholders side by side read as one value. The matcher (kb/explain/),
the successors of removed errors and the public reports' quotes (kb/records/reports.py) share it."""

from __future__ import annotations

import re

from kb.scan.messages import template_parts

_SPACE = re.compile(r"\s+")


def normalize(text: str) -> str:
    """Runs of white space become one space (messages are wrapped, logs re-indent them)."""
    return _SPACE.sub(" ", text)


_ESCAPED_QUOTE = re.compile(r"(?<!\\)\\+(['\"])")  # from a run's first backslash only: linear
_ENTITIES = {"&quot;": '"', "&#39;": "'", "&#x27;": "'", "&lt;": "<", "&gt;": ">", "&amp;": "&"}
_ENTITY = re.compile("|".join(_ENTITIES))


def unescaped(text: str) -> str:
    """A log pasted as a JSON string (`\\'max_tokens\\'`) or copied from a web page (`&quot;`)
    reads as the plain text; templates go through the same step, so that one holding a
    backslash before a quote still matches its own message."""
    return _ENTITY.sub(lambda m: _ENTITIES[m.group()], _ESCAPED_QUOTE.sub(r"\1", text))


def literal_parts(template: str) -> tuple[list[str], list[str]]:
    """The literal parts a message is matched by, and the placeholder names between them. Two
    placeholders side by side (`{finished}{extra if x else ''}`) are one value to a reader of
    the message: it goes under the first one's name."""
    raw, raw_names = template_parts(template)
    parts, names = raw[:1], []
    for name, part in zip(raw_names, raw[1:]):
        if len(parts) > 1 and parts[-1] == "":
            parts[-1] = part
        else:
            parts.append(part)
            names.append(name)
    parts = [normalize(unescaped(p)) for p in parts]
    if parts:
        parts[0] = parts[0].lstrip()
        parts[-1] = parts[-1].rstrip()
    return parts, names


_WORD = re.compile(r"[A-Za-z]{3}")


def matchable(parts: list[str]) -> bool:
    """Whether any text can be told to be this message: its literal text holds a word. A
    template such as `{key}: {value}` or `{e}` would match nearly every line of a log."""
    return any(_WORD.search(p) for p in parts)
