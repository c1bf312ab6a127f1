"""Orchestration: scan + merge + render, written into a temporary folder and swapped in.

The only module that writes the output folder. Error pages, the bulk of the work, are
rendered in worker processes grouped by source file (so each file's excerpts are
highlighted once); a page whose inputs did not change since the last build is not rendered
again but taken over from it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional, TypeVar

from markupsafe import Markup

from kb.config.rules import flag_slug, page_slug
from kb.derived.attach import attach_derived, over_budget
from kb.derived.guidance import guidance
from kb.errors import KBError
from kb.files import compact_json
from kb.fit.launch import calculator
from kb.model import Record, ScanResult, Wording
from kb.paths import PACKAGE_DIR, cache_dir, data_dir
from kb.records.present import title_key
from kb.releases.history import History
from kb.releases.known import Known, known_releases
from kb.site.api import SiteInfo, api_files, api_record, check_trees, config_api_files, record_files
from kb.site.config_pages import env_pages, env_urls, key_pages, key_urls
from kb.site.flags import flag_pages
from kb.site.highlight import css, highlight_excerpts
from kb.site.home import gist_cites, home_counts, top_errors
from kb.site.output import Output
from kb.site.releases import known_release_pages, release_pages
from kb.site.render import (
    browse_page,
    curated_page,
    error_page,
    home_page,
    list_page,
    markdown_page,
    simple_page,
    templates_digest,
)
from kb.site.urlmap import redirects
from kb.site.views import Summary, cited_ids, error_view, family_ids, live_pages, summary
from kb.stages import Stages
from kb.urls import site_url
from kb.workers import worker_pool

PAGE_SIZE = 120  # records per list page: keeps every list page under 50 KB
FILES_PAGE_SIZE = 200
Progress = Callable[[str, int, int], None]
T = TypeVar("T")


@dataclass(frozen=True)
class BuildOptions:
    output: Path
    site_url: Optional[str] = None
    report_repo: str = "vllm-error-kb/vllm-error-kb"
    jobs: Optional[int] = None

    def __post_init__(self) -> None:
        if self.site_url:
            site_url(self.site_url)  # an http(s) URL, else a usage error


@dataclass(frozen=True)
class BuildReport:
    output: Path
    records: int
    pages_rendered: int
    files_written: int
    files_kept: int
    bytes: int
    largest_page: tuple[str, int]
    problems: tuple[str, ...] = field(default=())


def build_site(scan: ScanResult, options: BuildOptions, records: Sequence[Record],
               progress: Optional[Progress] = None, history: Optional[History] = None,
               wordings: Sequence[Wording] = (), warn: Optional[Callable[[str], None]] = None,
               known: Optional[Known] = None, stages: Optional[Stages] = None,
               input_key: Optional[str] = None, keep: bool = True) -> BuildReport:
    """The site of `scan` (the newest release), from its merged records, each with what sets it
    (attached by the merge: kb.records.merge.attach_set_by). With a `history`, also its older
    ids (aliases that redirect), the pages of removed errors (in `records`) and the release
    pages; without one, the releases kb knows (`known`, else from the shipped wordings)
    and the built release's page. `stages`: told as each stage ends; `input_key`: the digest of
    everything the site is made from (kb/site/reuse.py), kept in its manifest; `keep`: take over
    the previous build's files whose inputs did not change."""
    stages = stages or Stages()
    info = SiteInfo(scan.tree, options.report_repo, options.site_url.rstrip("/") if options.site_url else None,
                    history.releases if history is not None else (), check_trees(records),
                    json.dumps(calculator(scan.config, records), sort_keys=True))
    jobs = options.jobs if options.jobs is not None else (os.cpu_count() or 1)
    records = attach_derived(records, scan.config, jobs, cache_dir())
    stages.done("derived guidance", f"{sum(r.derived is not None for r in records):,} errors")
    if warn is not None:
        for w in over_budget(records):
            warn(w)
    try:
        out = Output(options.output, keep)
    except OSError as e:
        raise _write_error(e, options.output) from None
    try:
        report = _write_all(scan, list(records), info, out, options, progress, wordings, stages)
        if history is not None:
            releases, names = release_pages(history, records, info), history.releases
        else:
            known = known or known_releases(scan)
            releases, names = known_release_pages(known, records, info), tuple(r.name for r in known.releases)
        for path, text in releases:
            out.write(path, text)
        # Hosts with rewrites (Netlify, Cloudflare Pages): a record's `.json` path too, and the error
        # URLs of every release kb knows (kb/site/urlmap.py)
        out.write("_redirects", redirects(names, info.tree.release))
        out.commit(input_key)
    except OSError as e:  # a read-only folder, an immutable site, a full disk: the old site stays
        out.abort()
        raise _write_error(e, options.output) from None
    except BaseException:
        out.abort()
        raise
    report = replace(report, files_written=out.written, files_kept=out.kept, bytes=out.bytes)
    stages.done("write", f"{out.written:,} files written, {out.kept:,} kept, {out.bytes / 1e6:.1f} MB")
    return report


def _write_error(e: OSError, output: Path) -> KBError:
    """One located line for a failure to write the site, at the file it concerns; a file of the
    temporary folder beside the site is reported as the site."""
    temporary = e.filename and any(part.startswith(f".{output.name}.") for part in Path(str(e.filename)).parts)
    return KBError(f"cannot write the site: {e.strerror or e}", str(e.filename) if e.filename and not temporary
                   else str(output))


def _write_all(scan: ScanResult, records: list[Record], info: SiteInfo, out: Output, options: BuildOptions,
               progress: Optional[Progress], wordings: Sequence[Wording], stages: Stages) -> BuildReport:
    summaries = {r.id: summary(r) for r in records}
    canonical = live_pages(records)
    globals_key = json.dumps([templates_digest(), code_digest(), _info_key(info)], sort_keys=True)

    # Which records changed since the last build: their four files are made from one key.
    todo: dict[str, list[Record]] = {}
    changed: list[tuple[Record, str]] = []
    for r in records:
        key = record_key(globals_key, scan.file_keys.get(r.file, ""), r, summaries, canonical.get(r.id, ""))
        if not out.unchanged(_record_paths(r), key):
            todo.setdefault(r.file, []).append(r)
            changed.append((r, key))
    total = len(changed)
    if progress:
        progress("pages", 0, total)
    keys = {r.id: k for r, k in changed}
    largest = ("", 0)
    rendered = others = 0

    def take(done: Iterable[tuple[str, str, str]]) -> None:
        nonlocal largest, rendered
        for ident, path, html in done:
            out.write(path, html, keys[ident])
            rendered += 1
            if len(html) > largest[1]:
                largest = (path, len(html))
            if progress and (rendered % 50 == 0 or rendered == total):
                progress("pages", rendered, total)

    with _Renderer(todo, summaries, info, options.jobs, canonical) as pages:  # workers start rendering now
        for r, key in changed:
            for path, text in record_files(r, info):
                out.write(path, text, key)
        # the other pages are made here while the workers render the error pages
        other_largest = ("", 0)
        for path, data in _other_pages(scan, records, info, summaries, wordings):
            out.write(path, data)
            others += 1
            if path.endswith(".html") and isinstance(data, str) and len(data.encode()) > other_largest[1]:
                other_largest = (path, len(data.encode()))
            take(pages.ready())
        take(pages)
    if other_largest[1] > largest[1]:
        largest = other_largest
    stages.done("pages", f"{rendered:,} error pages rendered, {len(records) - rendered:,} unchanged; "
                         f"{others:,} other files: lists, flags, API, search indexes")
    return BuildReport(options.output, len(records), rendered, out.written, out.kept, out.bytes, largest)


def _record_paths(r: Record) -> tuple[str, ...]:
    return (f"errors/{r.id}/index.html", f"api/errors/{r.id}")


def code_files() -> list[Path]:
    """Every module of kb, in every subpackage."""
    return sorted(PACKAGE_DIR.rglob("*.py"))


def code_digest() -> str:
    """Changes when any of kb's code changes: part of every page's key, with the templates'
    digest (templates and static files)."""
    h = hashlib.sha256()
    for p in code_files():
        h.update(p.relative_to(PACKAGE_DIR).as_posix().encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def record_key(globals_key: str, file_key: str, r: Record, summaries: dict[str, Summary], canonical: str = "") -> str:
    """Everything a record's page and JSON are made from: the source file's bytes (the sites
    follow from them), the curated entry (with its family), and what the page shows of related
    records, of the family's members and of the errors its prose cites."""
    h = hashlib.sha256(globals_key.encode())
    h.update(json.dumps([file_key, r.file, r.id, r.slug, r.title, repr(r.entry), list(r.stale), r.checked,
                         repr(r.history), r.removed_since, r.ref, list(r.aliases), repr(r.setby), repr(r.reports),
                         _derived_key(r), canonical,
                         [list(vars(summaries[i]).values()) for i in r.related],
                         [list(vars(summaries[i]).values()) for i in family_ids(r) if i in summaries],
                         [list(vars(summaries[i]).values()) for i in cited_ids(r) if i in summaries]]).encode())
    if not file_key:  # sites built by hand (tests): their facts are the input
        h.update(repr(r.sites).encode())
    return h.hexdigest()


def _derived_key(r: Record) -> str:
    """The derived guidance as its JSON, which reads the same whether computed or read back from
    the cache (its repr does not: a cached flag's keys come back sorted)."""
    return json.dumps(r.derived.to_json(), sort_keys=True, default=repr) if r.derived is not None else ""


def _info_key(info: SiteInfo) -> list[Any]:
    t = info.tree
    return [t.kind, t.ref, t.commit, t.commit_date, t.release, info.report_repo, info.site_url]


# --- error pages, in worker processes --------------------------------------------------------
# the records of one source file, their related and family links, the live page of each removed one
Group = tuple[list[Record], dict[str, Summary], dict[str, str]]


def _render_group(records: list[Record], links: dict[str, Summary], info: SiteInfo,
                  canonical: dict[str, str]) -> list[tuple[str, str, str]]:
    html_lines = highlight_excerpts(s.excerpt for r in records for s in r.sites)
    return [
        (r.id, f"errors/{r.id}/index.html",
         error_page(error_view(r, info, [links[i] for i in r.related], [links[i] for i in family_ids(r) if i in links],
                               canonical.get(r.id, ""), [links[i] for i in cited_ids(r) if i in links]),
                    info, html_lines))
        for r in records
    ]


def _render_batch(batch: list[Group], info: SiteInfo) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    for records, related, canonical in batch:
        out.extend(_render_group(records, related, info, canonical))
    return out


class _Renderer:
    """Error pages, rendered in worker processes from the moment it is entered; iterate it to
    collect (id, path, html). With one job, or few pages, they are rendered here, lazily."""

    def __init__(self, todo: dict[str, list[Record]], summaries: dict[str, Summary], info: SiteInfo,
                 jobs: Optional[int], canonical: Optional[dict[str, str]] = None) -> None:
        live = canonical or {}
        self.groups: list[Group] = [(todo[f], {i: summaries[i] for r in todo[f]
                                               for i in r.related + family_ids(r) + cited_ids(r) if i in summaries},
                                     {r.id: live[r.id] for r in todo[f] if r.id in live})
                                    for f in sorted(todo)]
        self.info = info
        self.workers = jobs if jobs is not None else (os.cpu_count() or 1)
        self.pool: Optional[ProcessPoolExecutor] = None
        self.futures: list[Future[list[tuple[str, str, str]]]] = []  # not collected yet

    def __enter__(self) -> _Renderer:
        if self.workers > 1 and len(self.groups) >= 4:
            self.pool = worker_pool(self.workers)
            self.futures = [self.pool.submit(_render_batch, b, self.info)
                            for b in _batches(self.groups, self.workers * 6)]
        return self

    def ready(self) -> Iterator[tuple[str, str, str]]:
        """The pages rendered by now and not collected yet, without waiting."""
        done, self.futures = _split_done(self.futures)
        for future in done:
            yield from future.result()

    def __iter__(self) -> Iterator[tuple[str, str, str]]:
        if self.pool is None:
            for records, related, canonical in self.groups:
                yield from _render_group(records, related, self.info, canonical)
            return
        while self.futures:
            yield from self.futures.pop(0).result()

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)


def _split_done(futures: list[Future[T]]) -> tuple[list[Future[T]], list[Future[T]]]:
    """(those done, the others), each future looked at once."""
    done: list[Future[T]] = []
    waiting: list[Future[T]] = []
    for f in futures:
        (done if f.done() else waiting).append(f)
    return done, waiting


def _batches(groups: list[Group], count: int) -> list[list[Group]]:
    order = sorted(range(len(groups)), key=lambda i: -sum(len(r.sites) for r in groups[i][0]))
    batches: list[list[Group]] = [[] for _ in range(min(count, len(groups)))]
    sizes = [0] * len(batches)
    for i in order:
        b = sizes.index(min(sizes))
        batches[b].append(groups[i])
        sizes[b] += sum(len(r.sites) for r in groups[i][0])
    return [b for b in batches if b]


# --- everything else ---------------------------------------------------------------------------
def _other_pages(scan: ScanResult, every: list[Record], info: SiteInfo, summaries: dict[str, Summary],
                 wordings: Sequence[Wording]) -> Iterator[tuple[str, str | bytes]]:
    records = [r for r in every if r.removed_since is None]  # lists and search show what the release raises
    flags = len({flag_slug(f) for f in scan.config.flags}) if scan.config is not None else 0
    env = len({page_slug(e.name) for e in scan.config.env}) if scan.config is not None else 0
    keys = len({page_slug(k.key) for k in scan.config.config_keys}) if scan.config is not None else 0
    counts = home_counts(scan, records) | {"flags": flags, "env_pages": env, "key_pages": keys}
    by_subsystem: dict[str, list[Record]] = {}
    by_class: dict[str, list[Record]] = {}
    for r in records:
        by_subsystem.setdefault(r.subsystem, []).append(r)
        by_class.setdefault(r.exception_class, []).append(r)
    subsystems = sorted(((k, len(v)) for k, v in by_subsystem.items()), key=lambda x: (-x[1], x[0]))
    classes = sorted(((k, len(v)) for k, v in by_class.items()), key=lambda x: (-x[1], x[0]))
    curated = [summaries[r.id] for r in sorted(records, key=lambda r: (title_key(r.title), r.id)) if r.curated]
    top = top_errors(records)
    yield "index.html", home_page(info, top, counts, subsystems, classes, gist_cites(top, summaries))
    if curated:
        lists = _paginate(curated)
        for n, part in enumerate(lists, start=1):
            path = "curated/" + (f"page-{n}/" if n > 1 else "") + "index.html"
            yield path, curated_page(path, info, part, len(curated), {"pages": len(lists), "page": n, "base": "curated/"})

    file_links: list[tuple[str, str]] = []  # (file, where its list starts)
    linked: set[str] = set()
    for name, group in sorted(by_subsystem.items()):
        pages = _paginate(group)
        for n, chunk in enumerate(pages, start=1):
            base = f"browse/{name}/"
            path = base + (f"page-{n}/" if n > 1 else "") + "index.html"
            by_file: dict[str, list[Summary]] = {}
            for r in chunk:
                by_file.setdefault(r.file, []).append(summaries[r.id])
                if r.file not in linked:
                    linked.add(r.file)
                    anchor = r.file.replace("/", "-").replace(".", "-")
                    file_links.append((r.file, f"{name}/{f'page-{n}/' if n > 1 else ''}#{anchor}"))
            yield path, list_page(path, info, f"{name}: errors by file", f"{len(group)} errors raised in vllm/{name}/."
                                  if name != "vllm" else f"{len(group)} errors raised in top-level modules of vllm/.",
                                  list(by_file.items()), {"pages": len(pages), "page": n, "base": base},
                                  [("browse/", "Browse")])
    per_file = Counter(r.file for r in records)
    files = sorted((f, per_file[f], "../" + href) for f, href in file_links)
    file_pages = _paginate(files, FILES_PAGE_SIZE)
    for n, rows in enumerate(file_pages, start=1):
        path = "browse/files/" + (f"page-{n}/" if n > 1 else "") + "index.html"
        fix = "../" if n > 1 else ""
        yield path, simple_page(path, "files.html.jinja2", info, "Errors by file",
                                files=[(f, c, fix + h) for f, c, h in rows],
                                pager={"pages": len(file_pages), "page": n, "base": "browse/files/"},
                                crumbs=[("browse/", "Browse")], total=len(files))
    yield "browse/index.html", browse_page(info, subsystems, classes, len(files), flags)
    if scan.config is not None and flags:
        yield from flag_pages(scan.config, records, info, summaries)
    if scan.config is not None and env:
        yield from env_pages(scan.config, records, info, summaries)
    if scan.config is not None and keys:
        yield from key_pages(scan.config, records, info, summaries)
    for name, group in sorted(by_class.items()):
        pages = _paginate(group)
        for n, chunk in enumerate(pages, start=1):
            base = f"browse/class/{name}/"
            path = base + (f"page-{n}/" if n > 1 else "") + "index.html"
            yield path, list_page(path, info, f"{name}: errors", f"{len(group)} errors raise {name}.",
                                  [("", [summaries[r.id] for r in chunk])],
                                  {"pages": len(pages), "page": n, "base": base}, [("browse/", "Browse")])

    yield "search/index.html", simple_page("search/index.html", "search.html.jinja2", info, "Search errors")
    example = next((r for r in records if r.id == "d97d5d8528e2b364"), records[0] if records else None)
    example_json = compact_json(api_record(example, info)) if example else "{}"
    yield "api/index.html", simple_page("api/index.html", "api.html.jinja2", info, "JSON API",
                                        example=example, example_json=example_json)
    yield "about/index.html", simple_page("about/index.html", "about.html.jinja2", info, "How to read an error page")
    readme = data_dir("errors") / "README.md"
    if readme.is_file():
        yield "contribute/index.html", markdown_page("contribute/index.html", info, "Curated entries: how to add one",
                                                     readme.read_text(encoding="utf-8"))
    # the error URLs without a file (kb/site/urlmap.py) are found inline: a host serves this page at
    # any depth, under any sub-path
    script = Markup((data_dir("templates") / "notfound.js").read_text(encoding="utf-8"))
    yield "404.html", simple_page("404.html", "404.html.jinja2", info, "Not found", script=script).replace(
        'href="./', 'href="/').replace('src="./', 'src="/')
    yield from api_files(every, info, wordings, url_scheme=True)
    yield from config_api_files(scan.config, info)
    yield "robots.txt", "User-agent: *\nAllow: /\n" + (f"Sitemap: {info.site_url}/sitemap.xml\n" if info.site_url else "")
    if info.site_url:
        flag_urls = (["flags/", *sorted({f"flags/{flag_slug(f)}/" for f in scan.config.flags})]
                     if scan.config is not None and flags else [])
        if scan.config is not None:
            flag_urls += env_urls(scan.config) + key_urls(scan.config)
        # only the pages that help: with curated or derived guidance (the others are noindex)
        yield "sitemap.xml", _sitemap(info.site_url, [r for r in records if guidance(r).helps], by_subsystem, flag_urls)
    static = data_dir("templates") / "static"
    for p in sorted(static.rglob("*")):
        if p.is_file():
            text = p.read_text(encoding="utf-8")
            # one stylesheet per page: the site's rules, then pygments' colours of the code
            yield f"static/{p.relative_to(static).as_posix()}", text + _code_css() if p.name == "style.css" else text


def _paginate(items: list[T], size: int = PAGE_SIZE) -> list[list[T]]:
    return [items[i : i + size] for i in range(0, len(items), size)] or [[]]


def _sitemap(base: str, records: list[Record], by_subsystem: dict[str, list[Record]],
             flag_urls: Sequence[str] = ()) -> str:
    urls = [f"{base}/", f"{base}/browse/", f"{base}/search/", f"{base}/api/", f"{base}/contribute/", f"{base}/about/"]
    urls += [f"{base}/curated/"] if any(r.curated for r in records) else []
    urls += [f"{base}/browse/{name}/" for name in sorted(by_subsystem)]
    urls += [f"{base}/errors/{r.id}/" for r in records]
    urls += [f"{base}/{page}" for page in flag_urls]
    body = "".join(f"<url><loc>{_xml(u)}</loc></url>\n" for u in urls)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n{body}</urlset>\n'


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _code_css() -> str:
    """Pygments colours for both themes: light by default, dark by system setting or choice."""
    dark = css("monokai", ".code")
    return (_scoped(css("default", ".code"), "") + "@media (prefers-color-scheme: dark) {\n"
            + _scoped(dark, ':root:not([data-theme="light"]) ') + "}\n" + _scoped(dark, ':root[data-theme="dark"] '))


def _scoped(rules: str, prefix: str) -> str:
    out = []
    for line in rules.splitlines():
        if line.startswith(("pre {", "td.linenos", "span.linenos", "td.linenos .special", "span.linenos.special")):
            continue
        out.append(prefix + line if line.startswith(".code") else line)
    return "\n".join(out) + "\n"


__all__ = ["BuildOptions", "BuildReport", "build_site"]
