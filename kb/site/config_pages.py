"""The pages per environment variable and per config.json key: `/env/` (every variable of
vllm/envs.py: type, default, doc), `/env/<VAR>/` (the same, where vLLM declares it, and every error
whose condition reads it), `/config-json/` and `/config-json/<key>/` (where vLLM reads the key, with
the alternatives and defaults of each read, and the errors whose condition reads it). Pure: the
config model and the records in, (path, html) out."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from kb.config.rules import page_slug
from kb.configmodel import JSON, ConfigKey, ConfigModel, EnvVar, KeyRead
from kb.model import Record
from kb.records.present import github_url
from kb.setby import CONFIG_JSON, ENV
from kb.site.api import SiteInfo
from kb.site.render import simple_page
from kb.site.views import Summary

SHOWN_ERRORS = 150  # errors listed on a variable's or key's page: keeps it under 50 KB
SHOWN_READS = 60  # places a config.json key is read, listed on its page
SHOWN_DOC = 2000  # characters of a variable's doc on its page (the index shows 200)
INDEX_PAGE = 80  # variables or keys per index page: keeps each under 50 KB


def shown_value(value: JSON, exact: bool) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True) if exact else str(value)


@dataclass(frozen=True)
class EnvView:
    var: EnvVar
    slug: str
    default: str
    reads: tuple[Summary, ...]  # errors whose condition reads it
    github: str


@dataclass(frozen=True)
class ReadView:
    read: KeyRead
    default: str  # "" when the read has none
    github: str


@dataclass(frozen=True)
class KeyView:
    key: ConfigKey
    slug: str
    reads: tuple[ReadView, ...]  # where vLLM reads it
    errors: tuple[Summary, ...]  # errors whose condition reads it


def _errors_by(records: Sequence[Record], kind: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in records:
        if r.setby is None or r.removed_since is not None:
            continue
        for i in r.setby.inputs:
            if i.kind == kind:
                out.setdefault(i.key, []).append(r.id)
    return {k: list(dict.fromkeys(v)) for k, v in out.items()}


def env_views(config: ConfigModel, records: Sequence[Record], summaries: dict[str, Summary],
              ref: str) -> list[EnvView]:
    errors = _errors_by(records, ENV)
    return [EnvView(e, page_slug(e.name), shown_value(e.default, e.default_exact),
                    tuple(summaries[i] for i in errors.get(e.name, []) if i in summaries),
                    github_url(ref, e.file, e.line)) for e in config.env]


def key_views(config: ConfigModel, records: Sequence[Record], summaries: dict[str, Summary],
              ref: str) -> list[KeyView]:
    errors = _errors_by(records, CONFIG_JSON)
    return [KeyView(k, page_slug(k.key),
                    tuple(ReadView(r, shown_value(r.default, True) if r.has_default else "",
                                   github_url(ref, r.file, r.line)) for r in k.reads),
                    tuple(summaries[i] for i in errors.get(k.key, []) if i in summaries)) for k in config.config_keys]


def env_pages(config: ConfigModel, records: Sequence[Record], info: SiteInfo,
              summaries: dict[str, Summary]) -> Iterator[tuple[str, str]]:
    shown = _one_per_slug(env_views(config, records, summaries, info.tree.ref))
    for v in shown:
        path = f"env/{v.slug}/index.html"
        yield path, simple_page(path, "env.html.jinja2", info, f"{v.var.name}: vLLM environment variable", v=v,
                                shown=SHOWN_ERRORS, doc_chars=SHOWN_DOC, crumbs=[("env/", "Environment variables")])
    yield from _index("env/", "envs.html.jinja2", info, "vLLM environment variables", shown)


def key_pages(config: ConfigModel, records: Sequence[Record], info: SiteInfo,
              summaries: dict[str, Summary]) -> Iterator[tuple[str, str]]:
    shown = _one_per_slug(key_views(config, records, summaries, info.tree.ref))
    for v in shown:
        path = f"config-json/{v.slug}/index.html"
        yield path, simple_page(path, "config-key.html.jinja2", info, f"{v.key.key}: config.json key", v=v,
                                shown=SHOWN_ERRORS, shown_reads=SHOWN_READS,
                                crumbs=[("config-json/", "config.json keys")])
    yield from _index("config-json/", "config-keys.html.jinja2", info, "config.json keys vLLM reads", shown)


_V = TypeVar("_V", EnvView, KeyView)


def _one_per_slug(views: Sequence[_V]) -> list[_V]:
    """Two names of one slug: the first one has the page."""
    seen: set[str] = set()
    out = []
    for v in views:
        if v.slug not in seen:
            seen.add(v.slug)
            out.append(v)
    return out


def _index(base: str, template: str, info: SiteInfo, title: str,
           views: Sequence[EnvView | KeyView]) -> Iterator[tuple[str, str]]:
    pages = [views[i : i + INDEX_PAGE] for i in range(0, len(views), INDEX_PAGE)] or [[]]
    for n, chunk in enumerate(pages, start=1):
        path = base + (f"page-{n}/" if n > 1 else "") + "index.html"
        yield path, simple_page(path, template, info, title, views=chunk, total=len(views),
                                pager={"pages": len(pages), "page": n, "base": base})


def _index_urls(base: str, count: int) -> list[str]:
    return [base, *(f"{base}page-{n}/" for n in range(2, (count + INDEX_PAGE - 1) // INDEX_PAGE + 1))]


def env_urls(config: ConfigModel) -> list[str]:
    """The sitemap's pages of the variables: the index pages, then one per variable."""
    slugs = sorted({page_slug(e.name) for e in config.env})
    return [*_index_urls("env/", len(slugs)), *(f"env/{s}/" for s in slugs)] if slugs else []


def key_urls(config: ConfigModel) -> list[str]:
    slugs = sorted({page_slug(k.key) for k in config.config_keys})
    return [*_index_urls("config-json/", len(slugs)), *(f"config-json/{s}/" for s in slugs)] if slugs else []
