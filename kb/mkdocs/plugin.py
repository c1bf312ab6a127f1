"""The `vllm-errors` MkDocs plugin: the error reference inside vLLM's own docs.

    plugins:
      - search
      - vllm-errors:
          release: 0.33.0        # or source: DIR, or git: URL + ref: REF
          path: errors           # where the pages go in the docs tree
          include: curated       # curated | all

Pages and JSON API files are added as MkDocs files at build time (nothing is written into the
docs folder). With `include: all` only the index and the curated pages enter the navigation:
MkDocs' navigation grows superlinearly with pages, and thousands of entries help no reader.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Optional

from mkdocs.config import config_options as c
from mkdocs.config.base import Config
from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin
from mkdocs.structure.files import File, Files
from mkdocs.structure.nav import Navigation, Section

from kb.paths import SCHEMAS
from kb.site.api import SiteInfo, api_record, dumps
from kb.errors import KBError
from kb.explain.index import match_index
from kb.mkdocs.pages import error_markdown, index_markdown, nav_title
from kb.model import Record

log = logging.getLogger("mkdocs.plugins.vllm-errors")

# What the pages use: admonitions, highlighted code with line numbers, tabs for before/after.
_EXTENSIONS: list[tuple[str, dict[str, Any]]] = [
    ("admonition", {}), ("attr_list", {}), ("pymdownx.highlight", {"anchor_linenums": True}),
    ("pymdownx.superfences", {}), ("pymdownx.tabbed", {"alternate_style": True}), ("tables", {}),
]


class ErrorsConfig(Config):
    release = c.Optional(c.Type(str))
    source = c.Optional(c.Type(str))
    git = c.Optional(c.Type(str))
    ref = c.Optional(c.Type(str))
    errors = c.Optional(c.Type(str))
    path = c.Type(str, default="errors")
    include = c.Choice(("curated", "all"), default="curated")
    title = c.Type(str, default="Error reference")


class ErrorsPlugin(BasePlugin[ErrorsConfig]):
    def __init__(self) -> None:
        self.records: list[Record] = []
        self.pages: dict[str, File] = {}
        self.index_file: Optional[File] = None

    def on_config(self, config: Any) -> Any:
        o = self.config
        chosen = [k for k in ("release", "source", "git") if o[k]]
        if len(chosen) > 1:
            raise PluginError(f"vllm-errors: give one of release, source, git (got {', '.join(chosen)})")
        if o.git and not o.ref:
            raise PluginError("vllm-errors: git needs ref (a tag, branch or commit)")
        if o.ref and not o.git:
            raise PluginError("vllm-errors: ref goes with git")
        path = o.path.strip("/")
        if not path or ".." in path.split("/"):
            raise PluginError(f"vllm-errors: path must be a folder inside the docs, got {o.path!r}")
        have = {e if isinstance(e, str) else next(iter(e)) for e in config.markdown_extensions}
        for name, options in _EXTENSIONS:
            if name not in have:
                config.markdown_extensions.append(name)
                if options:
                    config.mdx_configs[name] = {**options, **config.mdx_configs.get(name, {})}
        return config

    def on_files(self, files: Files, config: Any) -> Files:
        from kb.jobs import curated_records, scan_release
        from kb.records.lint import verified_ids
        from kb.scan.source import SourceSpec

        o = self.config
        spec = SourceSpec(source_dir=o.source, git=o.git, ref=o.ref,
                          vllm_version=o.release if (o.release or not (o.source or o.git)) else None)
        if spec.vllm_version is None and not (o.source or o.git):
            from kb import PINNED_VLLM

            spec = SourceSpec(vllm_version=PINNED_VLLM)
        try:
            scan = scan_release(spec)
            merged = curated_records(scan, Path(o.errors) if o.errors else None,
                                     warn=lambda text: log.info("vllm-errors: %s", text))
        except KBError as e:
            problems = "\n".join(getattr(e, "problems", []))
            raise PluginError(f"vllm-errors: {e}" + (f"\n{problems}" if problems else "")) from None
        info = SiteInfo(scan.tree)
        records = list(merged.records)
        shown = [r for r in records if r.curated] if o.include == "curated" else records
        self.records = shown
        ids = {r.id: r.title for r in shown}
        checked = verified_ids(tuple(records))
        path = o.path.strip("/")
        api_prefix = "../" * (path.count("/") + 1)
        self.pages = {}
        for r in shown:
            f = File.generated(config, f"{path}/{r.id}.md", content=error_markdown(r, info, ids, r.id in checked,
                                                                                 api_prefix))
            files.append(f)
            self.pages[r.id] = f
        self.index_file = File.generated(config, f"{path}/index.md",
                                         content=index_markdown(shown, info, o.include, o.title))
        files.append(self.index_file)
        for r in records:  # the API has every error, whatever the pages include
            text = dumps(api_record(r, info))
            for name in (f"api/errors/{r.id}", f"api/errors/{r.id}.json"):
                files.append(File.generated(config, name, content=text))
        files.append(File.generated(config, "api/errors/index.json", content=json.dumps(
            {"release": info.tree.release, "ref": info.tree.ref,
             "errors": [{"id": r.id, "slug": r.slug, "class": r.exception_class, "message": r.template,
                         "file": r.file, "line": r.line, "curated": r.curated} for r in records]},
            sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"))
        files.append(File.generated(config, "api/match-index.json", content=json.dumps(
            match_index(records, info.tree.release), sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"))
        files.append(File.generated(config, "api/schema.json",
                                    content=(SCHEMAS / "record.schema.json").read_text()))
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
        in_nav = [self.index_file.page] + [self.pages[r.id].page for r in sorted(
            (r for r in self.records if r.curated), key=lambda r: r.title.lower()) if self.pages[r.id].page is not None]
        for page, r in zip(in_nav[1:], sorted((r for r in self.records if r.curated), key=lambda r: r.title.lower())):
            page.title = nav_title(r)
        section = Section(self.config.title, in_nav)
        for page in in_nav:
            page.parent = section
        nav.items.append(section)
        listed = {id(p) for p in nav.pages}
        nav.pages.extend(p for p in in_nav if id(p) not in listed)
        return nav
