"""The pages per flag: `/flags/` (every `vllm serve` flag of the release, by group) and
`/flags/<flag>/` (its help, default, choices, and every error it takes part in). Pure: the
config model and the records in, (path, html) out."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from kb.config.rules import flag_slug, show_default
from kb.configmodel import ConfigModel, Flag
from kb.model import Record
from kb.records.present import github_url
from kb.setby import FLAG
from kb.site.api import SiteInfo
from kb.site.render import simple_page
from kb.site.views import Summary

SHOWN_ERRORS = 150  # errors listed per role on a flag page: keeps it under 50 KB


@dataclass(frozen=True)
class FlagView:
    flag: Flag
    slug: str
    default: str
    choices: tuple[str, ...]
    reads: tuple[Summary, ...]  # errors whose condition reads it
    earlier: tuple[Summary, ...]  # errors raised only after checks that read it passed
    keys: tuple[str, ...]  # keys of a JSON value that conditions read
    github: str


def flag_views(config: ConfigModel, records: Sequence[Record], summaries: dict[str, Summary],
               ref: str) -> list[FlagView]:
    reads: dict[str, list[str]] = {}
    earlier: dict[str, list[str]] = {}
    keys: dict[str, set[str]] = {}
    for r in records:
        if r.setby is None or r.removed_since is not None:
            continue
        for i in r.setby.inputs:
            if i.kind == FLAG and i.flag_page:
                reads.setdefault(i.flag_page, []).append(r.id)
                if "." in i.key:
                    keys.setdefault(i.flag_page, set()).add(i.key.split(".", 1)[1])
        for i in r.setby.earlier:
            if i.kind == FLAG and i.flag_page:
                earlier.setdefault(i.flag_page, []).append(r.id)
    out = []
    for f in config.flags:
        slug = flag_slug(f)
        page = f"flags/{slug}/"
        read = list(dict.fromkeys(reads.get(page, [])))
        first = [i for i in dict.fromkeys(earlier.get(page, [])) if i not in read]
        out.append(FlagView(f, slug, show_default(f), tuple(str(c) for c in f.choices or ()),
                            tuple(summaries[i] for i in read), tuple(summaries[i] for i in first),
                            tuple(sorted(keys.get(page, ()))), github_url(ref, f.file, f.line)))
    return out


def flag_pages(config: ConfigModel, records: Sequence[Record], info: SiteInfo,
               summaries: dict[str, Summary]) -> Iterator[tuple[str, str]]:
    views = flag_views(config, records, summaries, info.tree.ref)
    seen: set[str] = set()
    for v in views:
        if v.slug in seen:  # two actions of one name (an alias of another group): the first one has the page
            continue
        seen.add(v.slug)
        path = f"flags/{v.slug}/index.html"
        yield path, simple_page(path, "flag.html.jinja2", info, f"{v.flag.name}: vllm serve flag", v=v,
                                shown=SHOWN_ERRORS, crumbs=[("flags/", "Flags")])
    groups: dict[str, list[FlagView]] = {}
    for v in views:
        groups.setdefault(v.flag.group or "options", []).append(v)
    yield "flags/index.html", simple_page("flags/index.html", "flags.html.jinja2", info, "vllm serve flags",
                                          groups=sorted(groups.items()), total=len(seen))
