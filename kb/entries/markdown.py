"""Curated prose: markdown -> HTML with raw HTML escaped and only safe link targets."""

from __future__ import annotations

import re
import xml.etree.ElementTree as etree

import markdown
from markdown.extensions import Extension
from markdown.treeprocessors import Treeprocessor
from markupsafe import Markup

_SAFE_URL = re.compile(r"^(https?://|/|#|\.\.?/|[\w./-]+$)")


class _SafeLinks(Treeprocessor):
    def run(self, root: etree.Element) -> None:
        for el in root.iter("a"):
            if not _SAFE_URL.match(el.get("href", "")):
                el.set("href", "#")
        for el in root.iter("img"):
            if not _SAFE_URL.match(el.get("src", "")):
                el.set("src", "")


class _NoRawHtml(Extension):
    def extendMarkdown(self, md: markdown.Markdown) -> None:
        md.preprocessors.deregister("html_block")
        md.inlinePatterns.deregister("html")
        md.treeprocessors.register(_SafeLinks(md), "kb_safe_links", 0)


def _new() -> markdown.Markdown:
    return markdown.Markdown(
        extensions=[_NoRawHtml(), "fenced_code", "tables", "codehilite"],
        extension_configs={"codehilite": {"css_class": "code", "guess_lang": False}},
        output_format="html",
    )


_MD = _new()


def to_html(text: str) -> Markup:
    _MD.reset()
    return Markup(_MD.convert(text))


def to_inline_html(text: str) -> Markup:
    """A one-paragraph text without the surrounding <p>."""
    html = str(to_html(text))
    if html.startswith("<p>") and html.endswith("</p>") and html.count("<p>") == 1:
        html = html[3:-4]
    return Markup(html)


_HTML_TAG = re.compile(r"<\s*/?\s*[a-zA-Z][^>]*>")


def raw_html_in(text: str) -> list[str]:
    """Raw HTML tags in markdown outside code spans and fences (the loader rejects them)."""
    without_fences = re.sub(r"```.*?```", "", text, flags=re.S)
    without_code = re.sub(r"`[^`]*`", "", without_fences)
    return _HTML_TAG.findall(without_code)
