"""The `vllm-errors` MkDocs plugin: the error reference inside vLLM's own docs.

    plugins:
      - search
      - vllm-errors:
          release: 0.33.0        # or source: DIR, or git: URL + ref: REF, or wheel: FILE
          path: errors           # where the pages go in the docs tree
          include: curated       # curated | all

Pages and JSON API files are added as MkDocs files at build time (nothing is written into the
docs folder). With `include: all` only the index and the curated pages enter the navigation:
MkDocs' navigation grows superlinearly with pages, and thousands of entries help no reader.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Optional

from mkdocs.config import config_options as c
from mkdocs.config.base import Config, ValidationError
from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin
from mkdocs.structure import StructureItem
from mkdocs.structure.files import File, Files
from mkdocs.structure.nav import Navigation, Section
from mkdocs.structure.pages import Page

from kb.derived.attach import attach_derived
from kb.errors import KBError
from kb.jobs import curated_records, release_wordings, scan_release, source_spec
from kb.mkdocs.pages import error_markdown, escape_snippets, index_markdown, nav_title
from kb.model import Record
from kb.paths import cache_dir
from kb.records.present import title_key
from kb.scan.source import SourceSpec
from kb.site.api import SiteInfo, api_files, check_trees, config_api_files, record_files
from kb.site.views import cited_ids, error_view, family_ids, summary

log = logging.getLogger("mkdocs.plugins.vllm-errors")
STYLESHEET = "errors.css"  # the example fix's marks and wrapping, beside the pages (kb/mkdocs/errors.css)

# What the pages use: admonitions, highlighted code with line numbers, tables.
_EXTENSIONS: list[tuple[str, dict[str, Any]]] = [
    ("admonition", {}), ("attr_list", {}), ("pymdownx.highlight", {"anchor_linenums": True}),
    ("pymdownx.superfences", {}), ("tables", {}),
]


class DocsFolder(c.Type[str]):
    """A folder inside the docs for the pages: plain names joined by `/`. `.`, `..`, an empty
    name (a leading `/`), a backslash or a control character could put the pages over the
    docs' own (`.` would replace the home page) or outside them; api/ holds the JSON API."""

    def __init__(self, default: str) -> None:
        super().__init__(str, default=default)

    def run_validation(self, value: object) -> str:
        text = super().run_validation(value)
        parts = text.removesuffix("/").split("/")
        if any(p in ("", ".", "..") or not p.isprintable() or "\\" in p for p in parts):
            raise ValidationError("must be a folder inside the docs: names joined by '/', without '.', '..', "
                                  f"a leading '/', a backslash or a control character (got {text!r})")
        if parts[0] == "api":
            raise ValidationError(f"must not be inside api/, which holds the JSON API (got {text!r})")
        return "/".join(parts)


class ErrorsConfig(Config):
    release = c.Optional(c.Type(str))
    source = c.Optional(c.Type(str))
    git = c.Optional(c.Type(str))
    wheel = c.Optional(c.Type(str))
    ref = c.Optional(c.Type(str))
    errors = c.Optional(c.Type(str))
    path = DocsFolder(default="errors")
    include = c.Choice(("curated", "all"), default="curated")
    title = c.Type(str, default="Error reference")


class ErrorsPlugin(BasePlugin[ErrorsConfig]):
    def __init__(self) -> None:
        self.spec: Optional[SourceSpec] = None
        self.records: list[Record] = []
        self.pages: dict[str, File] = {}
        self.index_file: Optional[File] = None
        self.snippets = False  # the docs use pymdownx.snippets: scanned lines must not look like its markers

    def on_config(self, config: Any) -> Any:
        o = self.config
        try:  # the same rules as the command line's --source/--git/--ref/--vllm-version
            self.spec = source_spec(source=o.source, git=o.git, ref=o.ref, vllm_version=o.release, wheel=o.wheel)
        except KBError as e:
            raise PluginError(f"vllm-errors: {_option_names(str(e))}") from None
        config.extra_css.append(f"{o.path}/{STYLESHEET}")
        have = {e if isinstance(e, str) else next(iter(e)) for e in config.markdown_extensions}
        self.snippets = "pymdownx.snippets" in have
        for name, options in _EXTENSIONS:
            if name not in have:
                config.markdown_extensions.append(name)
                if options:
                    config.mdx_configs[name] = {**options, **config.mdx_configs.get(name, {})}
        return config

    def on_files(self, files: Files, config: Any) -> Files:
        o = self.config
        if self.spec is None:
            raise PluginError("vllm-errors: on_files ran before on_config")
        try:
            scan = scan_release(self.spec)
            merged = curated_records([("", scan)], Path(o.errors) if o.errors else None,
                                     warn=lambda text: log.info("vllm-errors: %s", text), set_by_jobs=1)
        except KBError as e:
            problems = "\n".join(getattr(e, "problems", []))
            raise PluginError(f"vllm-errors: {e}" + (f"\n{problems}" if problems else "")) from None
        records = attach_derived(merged.records, scan.config, 1, cache_dir())
        info = SiteInfo(scan.tree, checks=check_trees(records))
        shown = [r for r in records if r.curated] if o.include == "curated" else records
        self.records = shown
        titles = {r.id: r.title for r in shown}
        summaries = {r.id: summary(r) for r in records}
        path = o.path.strip("/")
        api_prefix = "../" * (path.count("/") + 1)
        self.pages = {}
        docs_own = set(files.src_uris)

        def add(f: File) -> None:  # never over a page of the docs: MkDocs would drop theirs without a word
            if f.src_uri in docs_own:
                raise PluginError(f"vllm-errors: the docs already have {f.src_uri}, where the plugin puts its own "
                                  f"(option 'path' is {o.path!r}; the JSON API goes under api/)")
            files.append(f)

        guard = escape_snippets if self.snippets else str
        for r in shown:
            view = error_view(r, info, [summaries[i] for i in r.related],
                              [summaries[i] for i in family_ids(r) if i in summaries],
                              cites=[summaries[i] for i in cited_ids(r) if i in titles])
            page = error_markdown(view, info, titles, api_prefix, config.use_directory_urls)
            f = File.generated(config, f"{path}/{r.id}.md", content=guard(page))
            add(f)
            self.pages[r.id] = f
        self.index_file = File.generated(config, f"{path}/index.md",
                                         content=guard(index_markdown(shown, info, o.include, o.title)))
        add(self.index_file)
        add(File.generated(config, f"{path}/{STYLESHEET}", content=(Path(__file__).parent / STYLESHEET).read_text()))
        for r in records:  # the API has every error, whatever the pages include
            for name, text in record_files(r, info):
                add(File.generated(config, name, content=text))
        for name, data in api_files(records, info, release_wordings([("", scan)]), search_box=False):
            add(File.generated(config, name, content=data))
        for name, text in config_api_files(scan.config, info):
            add(File.generated(config, name, content=text))
        return files

    def on_nav(self, nav: Navigation, config: Any, files: Files) -> Navigation:
        """One "Errors" section: the index, then the curated pages (all pages with include: curated)."""
        ours = {id(f) for f in self.pages.values()} | ({id(self.index_file)} if self.index_file else set())

        def keep(item: Any) -> bool:
            file = getattr(item, "file", None)
            return file is None or id(file) not in ours

        def prune(items: list[Any]) -> list[Any]:
            out = []
            for item in items:
                if isinstance(item, Section):
                    item.children = prune(item.children)
                    if not item.children:
                        continue
                if keep(item):
                    out.append(item)
            return out

        nav.items = prune(nav.items)
        if self.index_file is None or self.index_file.page is None:
            return nav
        in_nav: list[Page] = [self.index_file.page]
        for r in sorted((r for r in self.records if r.curated), key=lambda r: (title_key(r.title), r.id)):
            page = self.pages[r.id].page
            if page is not None:
                page.title = nav_title(r)
                in_nav.append(page)
        section = Section(self.config.title, list[StructureItem](in_nav))
        for page in in_nav:
            page.parent = section
        nav.items.append(section)
        listed = {id(p) for p in nav.pages}
        nav.pages.extend(p for p in in_nav if id(p) not in listed)
        return nav


def _option_names(text: str) -> str:
    """The shared rules speak of command-line flags; the plugin's options have other names."""
    for flag, option in (("--vllm-version", "release"), ("--source", "source"), ("--git", "git"), ("--ref", "ref"),
                         ("--wheel", "wheel")):
        text = text.replace(flag, option)
    return text
