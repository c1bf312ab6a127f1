"""The short answer: one line per error found, its id, its page's URL and its first fix, for CI
logs and coding agents (`kb explain --format short`) and for the lines the vLLM plugin prints
after vLLM's own error (kb/vllm_plugin/). One function makes the lines for both."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from kb.explain.match import Explanation, Found
from kb.explain.output import _page, own_values_of, own_values_text
from kb.explain.prose import FIX_CHARS, fix_text
from kb.scan.messages import placeholder_spans
from kb.urls import error_url

NO_PAGE = "-"  # the URL field of an error with no live page (a removed error nothing replaced)
VALUE_CHARS = 60  # a value put into a title, at most (a longer one is cut with "…")


@dataclass(frozen=True)
class ShortAnswer:
    id: str  # the error whose page answers (the live error an older wording leads to)
    title: str
    url: str  # the page of `release` (kb.urls.error_url), or NO_PAGE
    fix: str  # plain text: the first fix, for the user's own values when kb knows them; "" when none


def filled_title(title: str, values: tuple[tuple[str, str], ...]) -> str:
    """The title with the user's own values in place of the placeholders the match recovered
    (`Unknown quantization method: {self.quantization}.` -> `... method: fp9.`); a placeholder
    with no value stays as written."""
    known = dict(values)
    out: list[str] = []
    last = 0
    for a, b in placeholder_spans(title):
        value = known.get(title[a + 1:b - 1])
        out += [title[last:a], title[a:b] if value is None else " ".join(value.split())[:VALUE_CHARS + 1]]
        if value is not None and len(out[-1]) > VALUE_CHARS:
            out[-1] = out[-1][:VALUE_CHARS - 1] + "…"
        last = b
    return "".join(out) + title[last:]


def short_answer(f: Found, site_url: Optional[str], release: Optional[str]) -> ShortAnswer:
    head = f.answer.entry if f.answer is not None else f.best.entry
    page = f.answer.id if f.answer is not None else _page(f.best.entry)
    own = own_values_of(f)
    if own is not None:
        fix = own_values_text(own)
    elif head.get("solution"):
        fix = fix_text(str(head["solution"]), FIX_CHARS)[0]
    else:
        fix = ""
    title = str(head["title"])
    if head is f.best.entry:  # the values are those of the wording the user's text matched
        title = filled_title(title, f.best.values)
    return ShortAnswer(str(head["id"]), title, error_url(page, site_url, release) if page else NO_PAGE,
                       " ".join(fix.split()))


def short_line(a: ShortAnswer) -> str:
    """`<id> <url> <first fix>`, the title when there is no fix (an id and a URL hold no space:
    the rest of the line is the text)."""
    return f"{a.id} {a.url} {a.fix or a.title}"


def short_lines(ex: Explanation, site_url: Optional[str] = None) -> list[str]:
    """One line per error found (none when nothing is found), its page the release's."""
    return [short_line(short_answer(f, site_url, ex.release)) for f in ex.found]


def short_text(ex: Explanation, site_url: Optional[str] = None) -> str:
    return "".join(line + "\n" for line in short_lines(ex, site_url))
