"""Curated prose as plain text, for where Markdown is not rendered: the search page's results
and the terminal (`kb explain`'s "What it means"). The text is what a page shows of the
Markdown (rendered by kb/entries/markdown.py, then read without its tags), and a preview of it
ends at a sentence or a word, marked with "…", with no quote or bracket left open."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from kb.entries.markdown import to_html
from kb.entries.sentences import sentence_ends

PREVIEW_CHARS = 400  # the longest preview, its "…" aside
_SHORTEST = PREVIEW_CHARS // 2  # a cut keeps at least this much of a longer limit's text
_BLOCKS = frozenset({"p", "li", "pre", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "td", "th", "br"})
_SPACE = re.compile(r"\s+")
_CODE = re.compile(r"`([^`\n]+)`")  # a code span with no backtick in it
# what Markdown may read as markup outside such code spans: then the renderer reads the text
_MARKUP = re.compile(r"[`*_\[\]<>&\\#]|^\s*(?:[-+*]|\d+[.)])\s", re.MULTILINE)
_OPEN_SINGLE = re.compile(r"(?<!\w)['‘](?=\w)")  # 'auto': a quote, not the apostrophe of vLLM's
_CLOSE_SINGLE = re.compile(r"(?<=[\w.)])['’](?!\w)")


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _BLOCKS:
            self.parts.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _BLOCKS:
            self.parts.append(" ")

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def plain_text(markdown: str) -> str:
    """What a page shows of `markdown`, as one line: code, emphasis and links are their text."""
    reader = _Text()
    reader.feed(str(to_html(markdown)))
    reader.close()
    return _SPACE.sub(" ", "".join(reader.parts)).strip()


def _plain(markdown: str) -> str:
    """plain_text(), without the renderer for prose whose only markup is code spans (most of it)."""
    if _MARKUP.search(_CODE.sub("x", markdown)):
        return plain_text(markdown)
    return _SPACE.sub(" ", _CODE.sub(lambda m: m.group(1), markdown)).strip()


def closed(text: str) -> bool:
    """Whether every quote and bracket `text` opens it also closes."""
    if text.count('"') % 2 or text.count("“") != text.count("”"):
        return False
    if len(_OPEN_SINGLE.findall(text)) > len(_CLOSE_SINGLE.findall(text)):
        return False
    for opener, closer in ("()", "[]", "{}"):
        depth = 0
        for ch in text:
            depth += (ch == opener) - (ch == closer)
            if depth < 0:
                depth = 0
        if depth:
            return False
    return True


def preview(markdown: str, limit: int = PREVIEW_CHARS) -> str:
    """`markdown` as plain text of at most `limit` characters and its "…": whole sentences when
    they fill half of it, else whole words; never inside a quote or bracket it opened."""
    text = _plain(markdown)
    if len(text) <= limit:
        return text
    shortest = min(_SHORTEST, limit // 2)
    ends = list(sentence_ends(text, limit))  # kb/entries/sentences.py: not "e.g.", "...", "0.34.0"
    for end in reversed(ends):
        if end < shortest:
            break
        if closed(text[:end]):
            return text[:end] + " …"
    spaces = [m.start() for m in _SPACE.finditer(text, 0, limit + 1)]
    for cut in reversed(spaces):
        words = text[:cut].rstrip(" ,;:-–—")
        if cut < shortest:
            break
        if closed(words):
            return words + "…"
    cut = spaces[-1] if spaces else limit
    return text[:cut].rstrip(" ,;:-–—\"'“‘([{") + "…"
