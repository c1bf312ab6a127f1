"""Curated prose: markdown -> HTML with raw HTML escaped, only safe link targets and no images.

The loader asks `problems_in` what a Markdown renderer that allows HTML would let through (raw
HTML, also behind a backslash-escaped backtick; script links; images, which would load from
elsewhere), and every page renders the prose here, never with another renderer's settings:
the MkDocs plugin embeds this HTML too.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as etree
from collections.abc import Mapping
from typing import Any, Optional, Union

import markdown
from markdown.extensions import Extension
from markdown.extensions.fenced_code import FencedBlockPreprocessor, FencedCodeExtension
from markdown.treeprocessors import Treeprocessor
from markdown.util import HtmlStash
from markupsafe import Markup

# Python-Markdown's link pattern costs (number of `[`) x (length): both are capped per field,
# the length of all prose per entry too. The longest shipped field has 1,400 characters.
MAX_PROSE = 5_000
MAX_BRACKETS = 100
MAX_ENTRY_PROSE = 50_000
MAX_NESTING = 20  # elements inside elements: deeper lists or quotes exhaust the renderer's recursion
_SAFE_URL = re.compile(r"^(https?://|/|#|\.\.?/|[\w./-]+$)")


def safe_url(url: str) -> bool:
    """A link target a page may carry: http(s), a path or an anchor (no javascript:, data:, ...)."""
    return bool(_SAFE_URL.match(url))


class _SafeLinks(Treeprocessor):
    def run(self, root: etree.Element) -> None:
        for el in root.iter("a"):
            if not safe_url(el.get("href", "")):
                el.set("href", "#")
        for el in root.iter("img"):  # pages make no external requests, and entries ship no images
            alt = el.get("alt", "")
            el.tag, el.text = "span", alt
            el.attrib.clear()


# an error id written bare in prose ("fails with 66df3e6fd6142523") or alone in a code span
ERROR_ID = re.compile(r"(?<![0-9A-Za-z_])[0-9a-f]{16}(?![0-9A-Za-z_])")
Links = Mapping[str, tuple[str, str]]  # error id -> (href, title)


class _IdLinks(Treeprocessor):
    """Each known error id in text, or alone in a code span, becomes a link to its page whose text
    is its title (quoted) and whose title attribute names the id; text in links and code blocks,
    other code spans and unknown ids stay as they are."""

    def __init__(self, md: markdown.Markdown) -> None:
        super().__init__(md)
        self.links: Links = {}

    def run(self, root: etree.Element) -> None:
        if self.links:
            self._walk(root)

    def _walk(self, el: etree.Element) -> None:
        el.text, nodes = self._split(el.text)
        for child in list(el):
            tail, child.tail = child.tail, None
            ident = (child.text or "").strip()
            if child.tag == "code" and not len(child) and ident in self.links:
                if nodes:
                    nodes[-1].tail = (nodes[-1].tail or "") + "“"
                else:
                    el.text = (el.text or "") + "“"
                child = self._link(ident, self.links[ident])
                child.tail = "”"
            elif child.tag not in ("a", "pre", "code"):
                self._walk(child)
            nodes.append(child)
            head, links = self._split(tail)
            child.tail = (child.tail or "") + (head or "") or None
            nodes += links
        for child in list(el):
            el.remove(child)
        el.extend(nodes)

    def _split(self, text: Optional[str]) -> tuple[Optional[str], list[etree.Element]]:
        """`text` up to its first known id, and a link for each (with the text after it as its tail)."""
        found = [m for m in ERROR_ID.finditer(text or "") if m.group(0) in self.links]
        if not text or not found:
            return text, []
        links = []
        for n, m in enumerate(found):
            link = self._link(m.group(0), self.links[m.group(0)])
            stop = found[n + 1].start() if n + 1 < len(found) else len(text)
            link.tail = "”" + text[m.end():stop] + ("“" if n + 1 < len(found) else "")
            links.append(link)
        return text[: found[0].start()] + "“", links

    @staticmethod
    def _link(ident: str, target: tuple[str, str]) -> etree.Element:
        href, title = target
        link = etree.Element("a", {"class": "error-ref", "href": href, "title": f"error {ident}"})
        link.text = title.replace("\x02", "").replace("\x03", "")  # Markdown's own placeholder marks
        return link


class _NoRawHtml(Extension):
    def extendMarkdown(self, md: markdown.Markdown) -> None:
        md.preprocessors.deregister("html_block")
        md.inlinePatterns.deregister("html")
        md.treeprocessors.register(_IdLinks(md), "kb_id_links", 5)  # after inline patterns, before unescaping
        md.treeprocessors.register(_SafeLinks(md), "kb_safe_links", 0)


def _new(css_class: str) -> markdown.Markdown:
    return markdown.Markdown(
        extensions=[_NoRawHtml(), "fenced_code", "tables", "codehilite"],
        extension_configs={"codehilite": {"css_class": css_class, "guess_lang": False}},
        output_format="html",
    )


_RENDERERS: dict[str, markdown.Markdown] = {}


def to_html(text: str, css_class: str = "code", links: Optional[Links] = None) -> Markup:
    """`css_class`: the class of highlighted code blocks (`highlight` for MkDocs Material);
    `links`: the error ids to link (id -> href, title), none by default."""
    md = _RENDERERS.get(css_class) or _RENDERERS.setdefault(css_class, _new(css_class))
    md.reset()
    ids = md.treeprocessors["kb_id_links"]
    assert isinstance(ids, _IdLinks)
    ids.links = links or {}
    try:
        return Markup(md.convert(text))
    finally:
        ids.links = {}


def to_inline_html(text: str, css_class: str = "code", links: Optional[Links] = None) -> Markup:
    """A one-paragraph text without the surrounding <p>."""
    html = str(to_html(text, css_class, links))
    if html.startswith("<p>") and html.endswith("</p>") and html.count("<p>") == 1:
        html = html[3:-4]
    return Markup(html)


# --- what the loader refuses -------------------------------------------------------------------
class _Stash(HtmlStash):
    """Records the raw HTML a renderer that allows HTML would pass through (fenced code aside)."""

    def __init__(self) -> None:
        super().__init__()
        self.raw: list[str] = []
        self.recording = True

    def store(self, html: Union[str, etree.Element]) -> str:
        if self.recording and isinstance(html, str) and html.lstrip().startswith("<"):
            self.raw.append(html.strip())
        return super().store(html)

    def reset(self) -> None:
        super().reset()
        self.raw = []


class _Fenced(FencedBlockPreprocessor):
    def run(self, lines: list[str]) -> list[str]:
        stash = self.md.htmlStash
        assert isinstance(stash, _Stash)
        stash.recording = False  # fenced code is stashed as HTML too, escaped
        try:
            return super().run(lines)
        finally:
            stash.recording = True


class _Targets(Treeprocessor):
    def run(self, root: etree.Element) -> None:
        self.links = [el.get("href", "") for el in root.iter("a")]
        self.images = [el.get("src", "") for el in root.iter("img")]
        self.depth = 0
        todo = [(root, 0)]
        while todo:
            el, depth = todo.pop()
            self.depth = max(self.depth, depth)
            todo.extend((child, depth + 1) for child in el)


class _Inspect(Extension):
    def extendMarkdown(self, md: markdown.Markdown) -> None:
        md.htmlStash = _Stash()
        md.preprocessors.register(_Fenced(md, FencedCodeExtension().getConfigs()), "fenced_code_block", 25)
        md.treeprocessors.register(_Targets(md), "kb_targets", 0)


_INSPECTOR: list[Any] = []
_FIRST_TAG = re.compile(r"<[^>]*>?")


def problems_in(text: str, where: str) -> list[str]:
    """What curated prose (the field `where`) may not hold, as a renderer that allows raw HTML
    would read it."""
    if len(text) > MAX_PROSE:
        return [f"{where} is longer than {MAX_PROSE} characters"]
    if text.count("[") > MAX_BRACKETS:
        return [f"{where} has more than {MAX_BRACKETS} [ brackets"]
    if not _INSPECTOR:
        _INSPECTOR.append(markdown.Markdown(extensions=["fenced_code", "tables", _Inspect()], output_format="html"))
    md: markdown.Markdown = _INSPECTOR[0]
    md.reset()
    try:
        md.convert(text)
    except RecursionError:
        _INSPECTOR.clear()  # its state is half-way through a conversion: the next call builds a new one
        return [f"{where} nests lists or quotes too deeply (more than {MAX_NESTING} elements)"]
    stash = md.htmlStash
    assert isinstance(stash, _Stash)
    targets = md.treeprocessors["kb_targets"]
    assert isinstance(targets, _Targets)
    if targets.depth > MAX_NESTING:
        return [f"{where} nests lists or quotes too deeply (more than {MAX_NESTING} elements)"]
    out = [f"raw HTML in markdown ({where}): {_short(m.group(0) if (m := _FIRST_TAG.match(raw)) else raw)} "
           "(use backticks or plain text)" for raw in stash.raw]
    out += [f"unsafe link in markdown ({where}): {_short(url)!r} (only http(s)://, paths and #anchors)"
            for url in targets.links if not safe_url(url)]
    out += [f"image in markdown ({where}): {_short(url)!r} (pages make no external requests; entries ship no images)"
            for url in targets.images]
    return out


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
