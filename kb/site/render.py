"""ONE jinja2 Environment and pure render functions: records in, strings out, no I/O."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Optional
from urllib.parse import urlencode

import json

import jinja2
from markupsafe import Markup, escape
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import BashLexer, PythonLexer

from kb.site.api import SiteInfo, facts_sentence
from kb.site.highlight import highlight_excerpts
from kb.entries.markdown import to_html, to_inline_html
from kb.model import Record, Site
from kb.paths import data_dir
from kb.checks.evaluate import readable, to_tree
from kb.records.present import github_url, trigger_facts
from kb.checks.vocab import INPUTS, UNKNOWN

FULL_EXCERPTS = 3  # sites of one id shown with the 37-line excerpt; the rest with 7 lines
SHORT_RADIUS = 3
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")


@lru_cache(maxsize=None)
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
    env.filters["markdown"] = to_html
    env.filters["inline_markdown"] = to_inline_html
    env.filters["message"] = message_html
    env.filters["short_date"] = lambda d: (d or "")[:10]
    return env


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
    for m in _PLACEHOLDER.finditer(template):
        out.append(str(escape(template[last : m.start()])))
        out.append(f'<var class="ph" title="a value filled in at run time">{escape(m.group(0))}</var>')
        last = m.end()
    out.append(str(escape(template[last:])))
    return Markup("".join(out))  # noqa: S704 - every part escaped above


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
def site_view(site: Site, info: SiteInfo, html_lines: dict[int, str], full: bool, ref: Optional[str] = None) -> dict[str, Any]:
    e = site.excerpt
    numbers = range(e.start, e.end + 1) if full else range(max(e.start, site.line - SHORT_RADIUS),
                                                           min(e.end, site.fact.end_line + SHORT_RADIUS) + 1)
    return {
        "file": site.file,
        "line": site.line,
        "end_line": site.fact.end_line,
        "function": site.fact.qualname,
        "exception": site.fact.exception,
        "github": github_url(ref or info.tree.ref, site.file, site.line),
        "excerpt": excerpt_html(site, numbers, html_lines),
        "first": numbers[0],
        "last": numbers[-1],
        "full": full,
        "trigger": trigger_facts(site),
        "pydantic": site.pydantic_wrapped,
        "validation": site.fact.validation,
    }


def excerpt_html(site: Site, numbers: range, html_lines: dict[int, str]) -> Markup:
    """The excerpt's lines with their numbers, the raise statement's lines marked. Built here,
    not in the template: 160,000 lines per release make a template loop the slow part."""
    e = site.excerpt
    rows = []
    for n in numbers:
        html = html_lines.get(n)
        if html is None:
            html = str(escape(e.lines[n - e.start]))
        hit = " hit" if site.line <= n <= site.fact.end_line else ""
        rows.append(f'<span class="row{hit}"><span class="ln" aria-hidden="true">{n}</span>{html}</span>')
    return Markup("".join(rows))  # noqa: S704 - pygments escaped the code, numbers are ints


def issue_url(record: Record, info: SiteInfo) -> str:
    body = (f"Error page: /errors/{record.id}/\nRelease: {info.label} ({info.tree.ref})\n"
            f"Source: {record.file}:{record.line}\n\nWhat is wrong or missing:\n")
    query = urlencode({"title": f"[{record.id}] {record.title[:80]}", "body": body, "labels": "error-page"})
    return f"https://github.com/{info.report_repo}/issues/new?{query}"


def code_html(code: str, language: str) -> Markup:
    lexer = BashLexer() if language == "shell" else PythonLexer()
    return Markup(highlight(code.strip("\n"), lexer, HtmlFormatter(nowrap=True)))  # noqa: S704 - pygments escapes


def fix_view(record: Record, checked: bool) -> Optional[dict[str, Any]]:
    e = record.entry
    if e is None or e.example_fix is None:
        return None
    x = e.example_fix
    return {"model_config": x.model_config, "hardware": x.hardware, "language": x.language,
            "before": code_html(x.before, x.language), "after": code_html(x.after, x.language),
            "checked": checked}


def check_view(record: Record, checked: bool) -> Optional[dict[str, Any]]:
    """The check as the page shows it: inputs (with where each comes from), the condition,
    and the same condition as a JSON tree for static/check.js."""
    e = record.entry
    if e is None or e.check is None or not checked:
        return None
    c = e.check
    inputs = []
    for name in c.inputs:
        inp = INPUTS[name]
        where = {"flag": " / ".join(inp.flags), "config": "config.json " + " or ".join(inp.paths[:2]),
                 "hardware": "hardware"}[inp.kind]
        default = inp.default if inp.default is not UNKNOWN else None
        example = next((case.inputs[name] for case in c.cases if case.raises and name in case.inputs), default)
        inputs.append({"name": name, "doc": inp.doc, "where": where, "type": inp.type,
                       "value": "" if example is None else json.dumps(example) if not isinstance(example, str) else example})
    return {"inputs": inputs, "condition": readable(c.raises_when), "tree": json.dumps(to_tree(c.raises_when)),
            "manual": c.source_check == "manual", "reason": c.source_reason}


def history_view(record: Record) -> list[dict[str, Any]]:
    """One row per release the error appears in: where, and what changed since the row before."""
    rows: list[dict[str, Any]] = []
    previous = None
    for a in record.history:
        changes = []
        if previous is not None:
            if a.id != previous.id:
                changes.append("message edited" if a.file == previous.file else f"moved from {previous.file}")
            elif a.guard != previous.guard:
                changes.append("guard changed")
            elif a.lines != previous.lines:
                changes.append("line moved")
        rows.append({"release": a.release, "id": a.id, "file": a.file, "lines": ", ".join(map(str, a.lines)),
                     "template": a.template, "changes": ", ".join(changes)})
        previous = a
    return rows


def error_page(record: Record, info: SiteInfo, related: list[Record], html_lines: Optional[dict[int, str]] = None,
               checked: bool = False) -> str:
    page = Page(f"errors/{record.id}/index.html")
    if html_lines is None:
        html_lines = highlight_excerpts(s.excerpt for s in record.sites)
    full = FULL_EXCERPTS if len(record.sites) <= 4 else 1  # keeps pages of many-site ids under 50 KB
    sites = [site_view(s, info, html_lines, i < full, record.ref) for i, s in enumerate(record.sites)]
    triggers: list[dict[str, Any]] = []  # sites with the same trigger are listed once
    for view in sites:
        same = next((t for t in triggers if t["trigger"] == view["trigger"]), None)
        if same is None:
            triggers.append({"trigger": view["trigger"], "lines": [view["line"]]})
        else:
            same["lines"].append(view["line"])
    ctx = _common(info, page, record.title) | {
        "r": record,
        "e": record.entry,
        "sites": sites,
        "triggers": triggers,
        "facts": facts_sentence(record),
        "related": related,
        "issue_url": issue_url(record, info),
        "fix": fix_view(record, checked),
        "check": check_view(record, checked),
        "defensive_code": code_html(record.entry.defensive.code, "python")
        if record.entry is not None and record.entry.defensive is not None else None,
        "ref": record.ref or info.tree.ref,
        "history": history_view(record),
    }
    return environment().get_template("error.html.jinja2").render(ctx)


def redirect_page(path: str, target: str, title: str) -> str:
    """A static redirect (meta refresh + canonical + a plain link) from `path` to site path `target`."""
    page = Page(path)
    return environment().get_template("redirect.html.jinja2").render(
        {"url": page.root + target, "title": title, "root": page.root})


# --- lists -----------------------------------------------------------------------------------------
def list_page(path: str, info: SiteInfo, title: str, intro: str, groups: list[tuple[str, list[Record]]],
              pager: Optional[dict[str, Any]] = None, crumbs: Iterable[tuple[str, str]] = ()) -> str:
    page = Page(path)
    ctx = _common(info, page, title) | {"title": title, "intro": intro, "groups": groups, "pager": pager,
                                        "crumbs": list(crumbs)}
    return environment().get_template("list.html.jinja2").render(ctx)


def home_page(info: SiteInfo, curated: list[Record], counts: dict[str, int], subsystems: list[tuple[str, int]],
              classes: list[tuple[str, int]]) -> str:
    page = Page("index.html")
    ctx = _common(info, page, "vLLM Error KB") | {"curated": curated, "counts": counts, "subsystems": subsystems,
                                                  "classes": classes}
    return environment().get_template("home.html.jinja2").render(ctx)


def browse_page(info: SiteInfo, subsystems: list[tuple[str, int]], classes: list[tuple[str, int]],
                files: int) -> str:
    page = Page("browse/index.html")
    ctx = _common(info, page, "Browse errors") | {"subsystems": subsystems, "classes": classes, "files": files}
    return environment().get_template("browse.html.jinja2").render(ctx)


def simple_page(path: str, template: str, info: SiteInfo, title: str, **extra: Any) -> str:
    ctx = _common(info, Page(path), title) | extra
    return environment().get_template(template).render(ctx)


def markdown_page(path: str, info: SiteInfo, title: str, text: str) -> str:
    return simple_page(path, "prose.html.jinja2", info, title, body=to_html(text))
