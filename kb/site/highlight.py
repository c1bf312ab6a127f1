"""Source excerpts highlighted by pygments at build time, one HTML string per line.

Excerpts of one file overlap; their line ranges are merged and each merged range is lexed
once. Each line's spans are closed at its end, so lines can be sliced out per site.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pygments import highlight
from pygments.formatters import HtmlFormatter

from kb.model import Excerpt
from kb.site.lexer import FastPythonLexer

_LEXER = FastPythonLexer(stripnl=False, ensurenl=False)  # PythonLexer's tokens, found faster
_FORMATTER = HtmlFormatter(nowrap=True)


# Names, white space, punctuation and operators are drawn in the text colour (pygments' default
# style gives them no colour of their own, or a grey): their spans are half an excerpt's bytes.
_PLAIN = re.compile(r'<span class="(?:n|w|p|o)">([^<]*)</span>')


def highlight_lines(text: str) -> list[str]:
    return _PLAIN.sub(r"\1", highlight(text, _LEXER, _FORMATTER)).split("\n")


def highlight_excerpts(excerpts: Iterable[Excerpt]) -> dict[int, str]:
    """Line number -> highlighted HTML for every line of the given excerpts (of one file)."""
    ranges: list[tuple[int, int, str, dict[int, str]]] = []  # start, end, open string, lines
    for e in sorted(excerpts, key=lambda e: (e.start, e.end)):
        if ranges and e.start <= ranges[-1][1] + 1:
            start, end, quote, lines = ranges[-1]
            ranges[-1] = (start, max(end, e.end), quote, lines)
        else:
            ranges.append((e.start, e.end, e.open_string, {}))
        lines = ranges[-1][3]
        for i, text in enumerate(e.lines):
            lines.setdefault(e.start + i, text)
    out: dict[int, str] = {}
    for start, end, quote, lines in ranges:
        text = "\n".join(lines[n] for n in range(start, end + 1))
        if quote:
            text = quote + "\n" + text
        html = highlight_lines(text)
        if quote:
            html = html[1:]
        for n, line_html in zip(range(start, end + 1), html):
            out[n] = line_html
    return out


def css(style: str = "default", scope: str = ".code") -> str:
    rules: str = HtmlFormatter(style=style).get_style_defs(scope)  # type: ignore[no-untyped-call]
    return rules
