"""ONE jinja2 Environment and pure render functions: records in, strings out, no I/O."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Optional
from urllib.parse import urlencode

import jinja2
from markupsafe import Markup, escape
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import BashLexer, PythonLexer

from kb.derived.guidance import Guidance
from kb.entries.markdown import to_html, to_inline_html
from kb.model import Entry, Record
from kb.paths import data_dir
from kb.scan.messages import placeholder_spans
from kb.setby import KIND_LABELS, NOT_FOLLOWED
from kb.site.api import SiteInfo
from kb.site.fixdiff import fix_code
from kb.site.highlight import highlight_excerpts
from kb.site.home import TopError
from kb.site.views import SHOWN_INPUTS, SHOWN_TRIGGERS, ErrorView, SiteView, Summary

# Characters HTML does not allow in a document (NUL, the other C0 and C1 controls but tab, line
# feed, form feed and carriage return) and lone surrogates, which cannot be written as UTF-8.
# Scanned messages and excerpts can hold any of them ("\x00" in a string literal).
_NOT_HTML = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_ASCII_CONTROLS = bytes([*range(0x09), 0x0B, *range(0x0E, 0x20), 0x7F])


def html_text(text: str) -> str:
    """`text` with each character HTML does not allow replaced by U+FFFD. Runs over every page,
    so the common case (ASCII without controls) is checked at C speed first."""
    if text.isascii():
        data = text.encode("ascii")
        if len(data.translate(None, _ASCII_CONTROLS)) == len(data):
            return text
    return _NOT_HTML.sub("\ufffd", text)


class _Template(jinja2.Template):
    """Every page of the one Environment passes `html_text` on its way out."""

    def render(self, *args: Any, **kwargs: Any) -> str:
        return html_text(super().render(*args, **kwargs))


@cache
def environment(templates: Optional[str] = None) -> jinja2.Environment:
    folder = Path(templates) if templates else data_dir("templates")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(folder)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.template_class = _Template
    env.filters["markdown"] = _markdown
    env.filters["inline_markdown"] = _inline_markdown
    env.filters["message"] = message_html
    env.filters["error_title"] = title_html
    env.filters["short_date"] = lambda d: (d or "")[:10]
    return env


def cite_links(cites: Iterable[Summary], root: str, page: str = "errors/{id}/") -> dict[str, tuple[str, str]]:
    """id -> (href from a page at `root`, title): the error ids prose may link (views.cited_ids);
    `page`: where an error's page is from `root` (the MkDocs plugin's differ)."""
    return {c.id: (root + page.format(id=c.id), c.title) for c in cites}


@jinja2.pass_context
def _markdown(context: jinja2.runtime.Context, text: str) -> Markup:
    """Prose as HTML; the ids it cites that the page's `cites` names become links to their pages."""
    return to_html(text, links=cite_links(context.get("cites", ()), context.get("root", "")))


@jinja2.pass_context
def _inline_markdown(context: jinja2.runtime.Context, text: str) -> Markup:
    return to_inline_html(text, links=cite_links(context.get("cites", ()), context.get("root", "")))


def templates_digest(templates: Optional[str] = None) -> str:
    """Changes when any template or static file changes: part of every page's cache key."""
    folder = Path(templates) if templates else data_dir("templates")
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(folder).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def message_html(template: str) -> Markup:
    """The template, escaped, with each placeholder visibly marked."""
    out: list[str] = []
    last = 0
    for a, b in placeholder_spans(template):
        out.append(str(escape(template[last:a])))
        out.append(f'<var class="ph">{escape(template[a:b])}</var>')
        last = b
    out.append(str(escape(template[last:])))
    return Markup("".join(out))


def title_html(title: str) -> Markup:
    """An error's title as a heading or a link text: placeholders marked as in `message_html`, and
    the words vLLM quotes in backticks (`--max-model-len`) as code. A backtick inside a placeholder
    is the placeholder's; one with no partner (a title cut at its end) stays as it is."""
    spans = placeholder_spans(title)
    inside = {i for a, b in spans for i in range(a, b)}
    ticks = [i for i, ch in enumerate(title) if ch == "`" and i not in inside]
    opening = set(ticks[0:len(ticks) - len(ticks) % 2:2])
    closing = set(ticks[1:len(ticks) - len(ticks) % 2:2])
    out: list[str] = []
    last = 0
    for a, b in [*spans, (len(title), len(title))]:
        text = title[last:a]
        for i, ch in enumerate(text, last):
            out.append("<code>" if i in opening else "</code>" if i in closing else str(escape(ch)))
        if b > a:
            out.append(f'<var class="ph">{escape(title[a:b])}</var>')
        last = b
    return Markup("".join(out))


@dataclass(frozen=True)
class Page:
    """Where a page sits: `root` is the relative way back to the site's top ("../../")."""

    path: str  # e.g. "errors/<id>/index.html"

    @property
    def root(self) -> str:
        depth = self.path.count("/")
        return "../" * depth if depth else "./"


def _common(info: SiteInfo, page: Page, title: str) -> dict[str, Any]:
    return {"info": info, "tree": info.tree, "root": page.root, "page_title": title}


# --- error pages -------------------------------------------------------------------------------
def excerpt_html(site: SiteView, html_lines: dict[int, str]) -> Markup:
    """The excerpt's lines with their numbers, the raise statement's lines marked. Built here,
    not in the template: 160,000 lines per release make a template loop the slow part."""
    e = site.excerpt
    rows = []
    for n in range(site.first, site.last + 1):
        html = html_lines.get(n)
        if html is None:
            html = str(escape(e.lines[n - e.start]))
        rows.append(f'<span class="r h">{html}</span>' if site.line <= n <= site.end_line else f'<span class="r">{html}</span>')
    return Markup("".join(rows))


def issue_url(record: Record, info: SiteInfo) -> str:
    query = urlencode({"title": f"[{record.id}] {record.title[:60]}", "body": f"{info.label}\n\n", "labels": "error-page"})
    return f"https://github.com/{info.report_repo}/issues/new?{query}"


def code_html(code: str, language: str) -> Markup:
    lexer = BashLexer() if language == "shell" else PythonLexer()
    return Markup(highlight(code.strip("\n"), lexer, HtmlFormatter(nowrap=True)))


def error_page(view: ErrorView, info: SiteInfo, html_lines: Optional[dict[int, str]] = None) -> str:
    record, entry = view.record, view.entry
    page = Page(f"errors/{record.id}/index.html")
    if html_lines is None:
        html_lines = highlight_excerpts(s.excerpt for s in record.sites)
    fix = view.fix
    g = view.guidance
    ctx = _common(info, page, record.title) | {
        "r": record,
        "e": entry,
        "v": view,
        "g": g,
        "provenance_derived": ", ".join(sections(g, "derived")),
        "provenance_curated": ", ".join(sections(g, "curated", entry)),
        "excerpts": [excerpt_html(s, html_lines) if s.shown else Markup() for s in view.sites],
        "shown_triggers": SHOWN_TRIGGERS,
        "kinds": KIND_LABELS,
        "max_inputs": SHOWN_INPUTS,
        "not_followed": NOT_FOLLOWED,
        "issue_url": issue_url(record, info),
        "cites": view.cites,
        # the guards as "When it happens" writes them: "What sets this" repeats its trigger only where
        # following names to flags and keys changed it
        "has_placeholders": bool(placeholder_spans(record.template)),
        "raw_conditions": {s.fact.guard for s in record.sites},
        "fix_code": fix_code(fix.before, fix.after, fix.language) if fix else None,
        "defensive_code": code_html(entry.defensive.code, "python")
        if entry is not None and entry.defensive is not None else None,
    }
    return environment().get_template("error.html.jinja2").render(ctx)


def sections(g: Guidance, origin: str, entry: Optional[Entry] = None) -> list[str]:
    """The sections of a page whose text is curated or derived, as the provenance names them."""
    out = [name for name, where in (("what it means", g.meaning_from), ("solutions", g.solutions_from),
                                    ("example fix", g.fix.origin if g.fix is not None else "")) if where == origin]
    if origin == "curated" and entry is not None:
        out += [name for name, present in (("defensive patterns", entry.defensive is not None),
                                           ("prevention", bool(entry.prevention)), ("trigger", bool(entry.trigger)),
                                           ("common situations", bool(entry.common_situations))) if present]
    return out


def redirect_page(path: str, target: str, title: str) -> str:
    """A static redirect (meta refresh + canonical + a plain link) from `path` to site path `target`."""
    page = Page(path)
    return environment().get_template("redirect.html.jinja2").render(
        {"url": page.root + target, "title": title, "root": page.root})


# --- lists -----------------------------------------------------------------------------------------
def list_page(path: str, info: SiteInfo, title: str, intro: str, groups: list[tuple[str, list[Summary]]],
              pager: Optional[dict[str, Any]] = None, crumbs: Iterable[tuple[str, str]] = ()) -> str:
    page = Page(path)
    ctx = _common(info, page, title) | {"title": title, "intro": intro, "groups": groups, "pager": pager,
                                        "crumbs": list(crumbs)}
    return environment().get_template("list.html.jinja2").render(ctx)


SHOWN_CLASSES = 6  # exception classes the home page names; the rest are on /browse/


def home_page(info: SiteInfo, top: list[TopError], counts: dict[str, int], subsystems: list[tuple[str, int]],
              classes: list[tuple[str, int]], cites: Iterable[Summary] = ()) -> str:
    """`top`: the errors users hit most (kb.site.home.top_errors); `cites`: the errors their gists cite."""
    page = Page("index.html")
    ctx = _common(info, page, "vLLM Error KB") | {"top": top, "counts": counts, "subsystems": subsystems,
                                                  "classes": classes, "shown_classes": SHOWN_CLASSES,
                                                  "cites": tuple(cites)}
    return environment().get_template("home.html.jinja2").render(ctx)


def curated_page(path: str, info: SiteInfo, curated: list[Summary], total: int, pager: dict[str, Any]) -> str:
    """/curated/: every curated error of the release, by title, paginated."""
    return list_page(path, info, "Curated errors",
                     f"The {total} errors of {info.label} with curated explanations and fixes, by title.",
                     [("", curated)], pager)


def browse_page(info: SiteInfo, subsystems: list[tuple[str, int]], classes: list[tuple[str, int]],
                files: int, flags: int = 0) -> str:
    page = Page("browse/index.html")
    ctx = _common(info, page, "Browse errors") | {"subsystems": subsystems, "classes": classes, "files": files,
                                                  "flags": flags}
    return environment().get_template("browse.html.jinja2").render(ctx)


def simple_page(path: str, template: str, info: SiteInfo, title: str, **extra: Any) -> str:
    ctx = _common(info, Page(path), title) | extra
    return environment().get_template(template).render(ctx)


def markdown_page(path: str, info: SiteInfo, title: str, text: str) -> str:
    return simple_page(path, "prose.html.jinja2", info, title, body=to_html(text))
