"""Records -> Markdown pages for MkDocs Material (the same content as the standalone site).

Pure functions. Everything from vLLM's source goes into code blocks, code spans, escaped text
or percent-encoded link targets, each on one line where a line break would end its context.
Curated prose is rendered by kb's own renderer (no raw HTML, safe links, no images) and embedded
as one line of HTML: the docs' own Markdown extensions (attr_list, snippets, ...) never read it.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Optional
from urllib.parse import quote

from kb.entries.markdown import Links, to_html, to_inline_html
from kb.model import Record
from kb.records.present import code_span, one_line, title_key, trigger_text
from kb.setby import KIND_LABELS, Input
from kb.site.api import SiteInfo
from kb.site.fixdiff import fix_code
from kb.site.render import cite_links, sections
from kb.site.views import SHOWN_INPUTS, ErrorView, FixView

DERIVED_NOTE = "Derived from vLLM's source: kb reads the condition of this raise and what sets each input; no one wrote it."
PROVED_NOTE = "Derived from vLLM's source, proved by kb check."

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|<>&])")


def md_text(text: str) -> str:
    """Plain text safe in markdown, on one line: HTML escaped, markdown punctuation backslashed."""
    return _MD_SPECIAL.sub(lambda m: "\\" + m.group(1) if m.group(1) not in "<>&" else html.escape(m.group(1)),
                           one_line(text))


code = code_span


def prose(text: str, links: Optional[Links] = None) -> str:
    """Curated markdown as one line of HTML (a raw block MkDocs passes through untouched); the
    error ids it cites that `links` names become links to their pages, with their titles."""
    return _one_line_html(f'<div class="kb-prose">{to_html(text.strip(), "highlight", links)}</div>')


def prose_list(items: Sequence[str], tag: str, links: Optional[Links] = None) -> str:
    return _one_line_html(f'<{tag} class="kb-prose">' + "".join(f"<li>{to_inline_html(i, 'highlight', links)}</li>"
                                                               for i in items) + f"</{tag}>")


def fix_html(x: FixView) -> str:
    """An example fix as the site shows it (kb/site/fixdiff.py): before and after highlighted, wrapped
    between arguments, the change struck out in before and underlined in after, and said in words
    under them unless the fix says it itself; one line of HTML, so no Markdown extension reads it."""
    c = fix_code(x.before, x.after, x.language)
    cls = "kb-cmd" if c.single_line else ""
    sides = "".join(f'<p class="kb-fix-label kb-{side.lower()}">{side}</p><div class="highlight"><pre><code class="{cls}">'
                    f"{code}</code></pre></div>" for side, code in (("Before", c.before), ("After", c.after)))
    note = f'<p class="kb-changes">{c.note}</p>' if c.note and not x.change else ""
    return _one_line_html(f'<div class="kb-fix">{sides}{note}</div>')


def _one_line_html(text: str) -> str:
    """Newlines as character references: no line of it can start a Markdown block of its own."""
    return text.replace("\r", "&#13;").replace("\n", "&#10;")


def front_matter_string(text: str) -> str:
    """A YAML double-quoted string of printable ASCII, everything else escaped."""
    out = []
    for c in text:
        n = ord(c)
        out.append("\\" + c if c in '"\\' else c if 0x20 <= n < 0x7F else
                   f"\\x{n:02x}" if n <= 0xFF else f"\\u{n:04x}" if n <= 0xFFFF else f"\\U{n:08x}")
    return '"' + "".join(out) + '"'


_SNIPPET_LINE = re.compile(r"""^([ \t]*)(;*-+8<-+(?:[ \t]+(?:"(?:\\"|[^"\n\r])+?"|'(?:\\'|[^'\n\r])+?')(?![ \t])|(?![ \t])))$""",
                           re.M)
_SNIPPET_SECTION = re.compile(r"(?i)(?<![;-])(;*-+8<-+[ \t]+\[[ \t]*(?:start|end)[ \t]*:)")


def escape_snippets(page: str) -> str:
    """For docs that use pymdownx.snippets, which reads every line before anything else (fenced
    code too): a scanned line `--8<-- "file"` would include that file, a `--8<-- [start:x]` would
    drop its line. A `;` escapes both; snippets removes it again."""
    return _SNIPPET_SECTION.sub(r";\1", _SNIPPET_LINE.sub(r"\1;\2", page))


def fence(text: str, lang: str = "", options: str = "") -> str:
    ticks = "`" * max(3, max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    head = f"{ticks}{lang}{(' ' + options) if options else ''}"
    return f"{head}\n{text.rstrip()}\n{ticks}"


def indent(text: str, by: str = "    ") -> str:
    return "\n".join(by + line if line.strip() else "" for line in text.splitlines())


def error_markdown(view: ErrorView, info: SiteInfo, pages: dict[str, str], api_prefix: str,
                   directory_urls: bool = True) -> str:
    """One error page. `pages`: id -> title of the errors that have a page in this build; the ids
    its prose cites link to those of `view.cites` (as MkDocs places pages: `directory_urls`)."""
    r, e, g = view.record, view.entry, view.guidance
    links = cite_links(view.cites, "../", "{id}/") if directory_urls else cite_links(view.cites, "", "{id}.html")
    # MkDocs themes print the title as HTML without escaping it (nav, <title>): escape it here.
    out: list[str] = [f"---\ntitle: {front_matter_string(html.escape(one_line(r.title)))}\n---", "", f"# {md_text(r.title)}", "",
                      f"vllm-project/vllm · error · {code(r.exception_class)} · id {code(r.id)} · {md_text(info.label)}"
                      + (" · curated" if e else " · derived guidance" if g.derived else " · from source only"), ""]
    if r.removed_since:
        out += [f'!!! warning "No longer raised since vLLM {md_text(r.removed_since)}"', "",
                "    This page shows the error as it was in the last release that raised it.", ""]
    if r.stale:
        out += [f'!!! warning "May be out of date since {md_text(info.label)}"', ""]
        out += [indent("\n".join(f"- {md_text(why)}" for why in r.stale)), ""]
    out += ["## Error message", "", fence(r.template or "(raised without a message)", "text"), ""]
    if view.sites[0].pydantic:
        out += ['!!! note "Wrapped by pydantic"', "",
                indent("Raised while pydantic validates a config, so it reaches you as "
                       "`pydantic_core._pydantic_core.ValidationError: ... Value error, <message> [type=value_error, ...]`."),
                ""]
    if g.meaning_from == "derived":
        out += ["## What it means", "", f"*{DERIVED_NOTE}*", "", prose(g.meaning, links), ""]
        out += [prose(g.inputs, links), ""] if g.inputs else []
    elif g.meaning:
        out += ["## What it means", "", prose(g.meaning, links), ""]
    if view.family is not None:
        f = view.family
        out += ["## How this family works", "",
                f"This error is one of {f.size} with one mechanism: **{md_text(f.title)}**. What it means above "
                "is specific to this message; the mechanism they share is explained here once.", "",
                prose(f.explanation, links), ""]
        out += [f"- **{md_text(m.title)}** (this page)" if m.id == r.id else f"- [{md_text(pages[m.id])}]({m.id}.md)"
                for m in f.members if m.id == r.id or m.id in pages] + [""]
    out += set_by_markdown(r)
    out += ["## Source", ""]
    for i, s in enumerate(view.sites):
        ex = s.excerpt
        hl = " ".join(str(n - ex.start + 1) for n in range(s.line, s.end_line + 1))
        out += [f"Thrown at {code(f'{s.file}:{s.line}')} in {code(s.function)}", ""]
        if i < 3:
            out += [fence("\n".join(ex.lines), "python", f'linenums="{ex.start}" hl_lines="{hl}"'), ""]
        out += [f"[View on GitHub (pinned to {md_text(view.ref)})]({s.github})", ""]  # percent-encoded
    if e is not None and e.check is not None and view.check is not None:
        out += ["## Check your configuration", "",
                f"vLLM raises this error when {code(view.check.condition)}. Check a launch before spending "
                "GPU time:", "",
                fence("kb check --model-config config.json -- vllm serve MODEL " +
                      " ".join(f"--{i.replace('_', '-')} ..." for i in e.check.inputs[:3]), "shell"), ""]
    if g.solutions:
        out += ["## Solutions", ""] + ([f"*{PROVED_NOTE}*", ""] if g.solutions_from == "derived" else [])
        out += [prose_list(g.solutions, "ol", links), ""]
    if view.fix is not None:
        x = view.fix
        out += ["## Example fix", ""] + ([f"*{PROVED_NOTE}*", ""] if x.derived else [])
        facts = [f"{code(f'{k}: {v}')}" for k, v in {**x.model_config, **x.hardware}.items()]
        if facts:
            out += ["Assuming " + ", ".join(facts) + ".", ""]
        out += [fix_html(x), ""]
        if x.derived:
            out += ["✔ Proved: `kb check` predicts this error first for “before” and no error at all for “after”"
                    + (f": {_one_line_html(to_inline_html(x.change, 'highlight', links))}." if x.change else "."), ""]
        elif x.checked:
            out += ["✔ Checked: `kb check` predicts this error for “before” and no error at all for “after”.", ""]
    if e is not None and e.defensive is not None:
        out += ["## Defensive patterns", "", f"Strategy: **{e.defensive.strategy}**", "",
                f"### {md_text(e.defensive.title)}", "", fence(e.defensive.code, "python"), ""]
    if e is not None and e.prevention:
        out += ["## Prevention", "", prose_list(e.prevention, "ul", links), ""]
    out += ["## When it happens", "", "### Trigger", ""]
    if e is not None and e.trigger:
        out += [prose(e.trigger, links), "", "From the source:", ""]
    for site in r.sites[:3]:
        out += [trigger_text(site, markdown=True), ""]
    if e is not None and e.common_situations:
        out += ["### Common situations", ""]
        items = "".join(
            f"<li>{to_inline_html(c.text, 'highlight', links)}" + "".join(
                f' <a href="{html.escape(u)}">{html.escape(u.removeprefix("https://github.com/"))}</a>'
                for u in c.references) + "</li>" for c in e.common_situations)
        out.append(_one_line_html(f'<ul class="kb-prose">{items}</ul>'))
    if r.reports:
        out += ["", "### Public reports", "", "GitHub issues and pull requests that quote this message, by their own titles:", ""]
        # one line of HTML, as the situations' references: a title's `~~`, `==` or bare URL is no
        # markup of any MkDocs extension there
        items = "".join(f'<li><a href="{html.escape(rep.url)}">{html.escape(rep.title)}</a> '
                        f'<small>{html.escape(rep.url.removeprefix("https://github.com/"))}</small></li>'
                        for rep in r.reports)
        out.append(_one_line_html(f'<ul class="kb-reports">{items}</ul>'))
    out += ["", "## Related errors", ""]
    out += [f"- [{md_text(pages[o.id])}]({o.id}.md)" for o in view.related if o.id in pages] or ["None with a page here."]
    if view.history:
        out += ["", "## History", "", "| Release | Where |", "|---|---|"]
        out += [f"| {md_text(h.release)} | {code(h.file + ':' + h.lines)} |" for h in view.history]
    out += ["", "---", "",
            f"Source facts from [vllm-project/vllm@{md_text(info.tree.ref)}](https://github.com/vllm-project/vllm/tree/"
            f"{quote(info.tree.ref, safe='/')}). Derived from the source: the message, the source excerpt, the trigger and the related "
            "errors" + (f"; and, marked as such, {', '.join(sections(g, 'derived'))} (derived from vLLM's source, proved "
                        "by `kb check`)" if g.derived else "") + "."
            + (f" Curated (checked by `kb lint`): {', '.join(sections(g, 'curated', e))}." if e else ""), "",
            f"Data as JSON: [/api/errors/{r.id}]({api_prefix}api/errors/{r.id})", ""]
    return "\n".join(out)


def set_by_markdown(r: Record) -> list[str]:
    """The "What sets this" section: the same facts as the site's, flags as code (no flag pages here)."""
    sb = r.setby
    if sb is None:
        return []
    out = ["## What sets this", "",
           "*From vLLM's source: kb follows every name the condition of this raise reads to the `vllm serve` flag, "
           "config.json key, environment variable or run-time fact behind it.*", "",
           f"Reachable through: **{md_text(sb.reachability)}** ({md_text(sb.basis)}).", ""]
    if sb.trigger:
        out += [f"Raised when {code(sb.trigger)} (the condition in the source, with users' names).", ""]
    out += [_input_line(i) for i in sb.inputs[:SHOWN_INPUTS]] or [
        "The condition reads no name: vLLM raises this whenever the line is reached."]
    if sb.earlier:
        out += ["", "Checked first: vLLM reaches this raise only when the checks before it in the same block did not "
                "raise. They also read:", ""]
        out += [_input_line(i) for i in sb.earlier[:SHOWN_INPUTS]]
    return [*out, ""]


def _input_line(i: Input) -> str:
    text = f"- {code(i.key)} ({md_text(KIND_LABELS[i.kind])})"
    if i.default is not None:
        text += f", default {code(_cut(i.default, 120))}"
    if i.choices:
        text += ", one of " + ", ".join(code(c) for c in i.choices[:12]) + (" …" if len(i.choices) > 12 else "")
    text += "."
    if i.help:
        text += " " + md_text(_cut(i.help, 300))
    return text + f" Read as {code(_cut(i.read, 160))}: {md_text(i.via)}."


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def index_markdown(records: Sequence[Record], info: SiteInfo, include: str, title: Optional[str] = None) -> str:
    live = [r for r in records if r.removed_since is None]
    curated = [r for r in live if r.curated]
    out = [f"# {title or 'Error reference'}", "",
           f"The errors that {md_text(info.label)} can raise, from its source: **{len(curated)} of "
           f"{len(live)} errors curated**, with explanations and fixes checked by `kb check`.", "", "## Curated errors", ""]
    out += [f"- [{md_text(r.title)}]({r.id}.md)" for r in sorted(curated, key=lambda r: (title_key(r.title), r.id))] or ["None yet."]
    if include == "all":
        by_sub: dict[str, list[Record]] = {}
        for r in live:
            by_sub.setdefault(r.subsystem, []).append(r)
        out += ["", "## All errors by subsystem", ""]
        for name in sorted(by_sub):
            out += ["", f"### {md_text(name)} ({len(by_sub[name])})", ""]
            out += [f"- [{md_text(r.title)}]({r.id}.md) — {code(f'{r.file}:{r.line}')}" for r in by_sub[name]]
    return "\n".join(out) + "\n"


def nav_title(r: Record, limit: int = 60) -> str:
    """The title for the navigation, HTML-escaped: themes print it as HTML."""
    t = one_line(r.title)
    return html.escape(t if len(t) <= limit else t[: limit - 1].rsplit(" ", 1)[0] + "…")


__all__ = ["error_markdown", "escape_snippets", "index_markdown", "md_text", "nav_title"]


