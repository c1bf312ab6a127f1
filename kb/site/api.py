"""Record -> the JSON served at /api/errors/<id>: ErrLookup's ErrorEntry (schema v2) fields
with the same names and types, then ours under `kb`.

The prose fields hold curated text, else the guidance kb derives from vLLM's source (kb/derived/:
`kb.derived.parts` names which fields), else null (`commonSituations`, `documentation`) or an
empty list: never a placeholder. `triggerScenarios` always holds the condition from the source.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from kb.derived.guidance import Fix, api_fields, guidance
from kb.explain.index import match_index
from kb.explain.match import MATCH_INDEX
from kb.files import compact_json, gzip_text
from kb.model import REPO, RaiseSite, Record, TreeInfo, Wording
from kb.paths import SCHEMAS
from kb.records.present import github_url, message_pattern, shown_lines, title_key, trigger_text
from kb.scan.source import commit_kind
from kb.search.index import search_index
from kb.search.query import SEARCH_INDEX
from kb.search.shards import word_shards

if TYPE_CHECKING:
    from kb.configmodel import ConfigModel

SCHEMA_VERSION = 2


@dataclass(frozen=True)
class SiteInfo:
    """What every page and record says about the release it describes."""

    tree: TreeInfo
    report_repo: str = "vllm-error-kb/vllm-error-kb"
    site_url: Optional[str] = None
    releases: tuple[str, ...] = ()  # a multi-release build: the releases, oldest first
    # every verified curated check: (id, its inputs, its condition as a JSON tree for static/check.js),
    # so that a page's form finds the valid values as `kb check` does, against the checks of the same flags
    checks: tuple[tuple[str, tuple[str, ...], str], ...] = ()
    # what the memory pages' calculator computes with (kb.fit.launch.calculator), as JSON
    fit_defs: str = "{}"

    @property
    def label(self) -> str:
        return f"vLLM {self.tree.release}" if self.tree.release else f"vLLM @ {self.tree.ref[:10]}"

    @property
    def commit_kind(self) -> str:
        """`full`: a git sha; `short`: the abbreviated commit of a release wheel's vllm/_version.py;
        `tag`: no commit is known (analyzedSha then holds the release tag)."""
        return commit_kind(self.tree.commit)


def check_trees(records: Sequence[Record]) -> tuple[tuple[str, tuple[str, ...], str], ...]:
    """SiteInfo.checks of the records: one function for the site and the MkDocs plugin."""
    from kb.checks.evaluate import to_tree

    return tuple((r.id, r.entry.check.inputs, json.dumps(to_tree(r.entry.check.raises_when)))
                 for r in records if r.checked and r.entry is not None and r.entry.check is not None)


def facts_sentence(record: Record) -> str:
    s = record.sites[0]
    where = f"{s.file}:{s.line}" + (f" (and {len(record.sites) - 1} more sites)" if len(record.sites) > 1 else "")
    text = f"{record.exception_class} raised by {s.fact.qualname} at {where}."
    if s.pydantic_wrapped:
        text += (" It is raised while pydantic validates a config, so it reaches users wrapped in "
                 "pydantic_core.ValidationError (\"Value error, ...\").")
    return text


def api_record(record: Record, info: SiteInfo) -> dict[str, Any]:
    s = record.sites[0]
    first, last = shown_lines(s, record.curated)
    e = record.entry
    g = guidance(record)
    documentation = " ".join(p for p in (g.meaning, g.inputs) if p) or None
    if g.trigger_from == "curated" and e is not None:
        triggers = e.trigger
    elif g.trigger_from == "derived" and record.derived is not None:
        triggers = f"{record.derived.meaning} From the source: {trigger_text(s)}"
    else:
        triggers = trigger_text(s)
    situations = None if e is None or not e.common_situations else "\n".join(
        f"- {c.text}" for c in e.common_situations)
    defensive = e.defensive if e is not None else None
    strategy = None
    if defensive is not None:
        strategy = "try-catch" if defensive.strategy == "try-except" else defensive.strategy
    tags = sorted({record.subsystem.replace("_", "-"), _kebab(record.exception_class)}
                  | ({"pydantic-validation"} if s.pydantic_wrapped else set()))
    return {
        "id": record.id,
        "repo": REPO,
        "slug": record.slug,
        "errorCode": None,
        "errorMessage": record.template or f"{record.exception_class} (no message)",
        "messagePattern": message_pattern(record.template),
        "errorType": "exception",
        "errorClass": record.exception_class,
        "httpStatus": None,
        "severity": "error",
        "filePath": s.file,
        "lineNumber": s.line,
        "sourceCode": "\n".join(s.excerpt.lines[first - s.excerpt.start:last - s.excerpt.start + 1]),
        "sourceCodeStart": first,
        "sourceCodeEnd": last,
        "githubUrl": github_url(record.ref or info.tree.ref, s.file, s.line),
        "documentation": documentation,
        "triggerScenarios": triggers,
        "commonSituations": situations,
        "solutions": list(g.solutions),
        "exampleFix": _fix_text(g.fix) if g.fix is not None else None,
        "handlingStrategy": strategy,
        "validationCode": defensive.code if defensive is not None and defensive.strategy == "validation" else None,
        "typeGuard": defensive.code if defensive is not None and defensive.strategy == "type-guard" else None,
        "tryCatchPattern": defensive.code if defensive is not None and defensive.strategy == "try-except" else None,
        "preventionTips": list(e.prevention) if e is not None else [],
        "tags": tags,
        "analyzedSha": info.tree.commit or info.tree.ref,  # no commit known: the tag that names the source
        "analyzedAt": info.tree.commit_date or "1970-01-01T00:00:00Z",
        "schemaVersion": SCHEMA_VERSION,
        "kb": {
            "curated": e is not None,
            "stale": list(record.stale),
            "title": record.title,
            "template": record.template,
            "page": f"/errors/{record.id}/",
            "release": info.tree.release,
            "ref": record.ref or info.tree.ref,
            "commit": info.tree.commit,
            "commitKind": info.commit_kind,
            "subsystem": record.subsystem,
            "related": list(record.related),
            "sites": [_site(x) for x in record.sites],
            "check": e.check.to_json() if e is not None and e.check is not None else None,
            "references": list(e.references) if e is not None else [],
            "reports": [rep.to_json() for rep in record.reports],
            "history": _history(record),
            "setBy": record.setby.to_json() if record.setby is not None else None,
            "family": e.family.to_json() if e is not None and e.family is not None else None,
        } | api_fields(record),
    }


def _history(record: Record) -> Optional[dict[str, Any]]:
    if not record.history:
        return None
    return {
        "firstSeen": record.history[0].release,
        "lastSeen": record.history[-1].release,
        "removedSince": record.removed_since,
        "aliases": list(record.aliases),
        "releases": [{"release": a.release, "id": a.id, "file": a.file, "lines": list(a.lines), "template": a.template}
                     for a in record.history],
    }


def alias_record(old: str, current: str, kind: str, release: str) -> dict[str, Any]:
    """What /api/errors/<old id> serves once the id became an alias: the current id."""
    return {"id": old, "alias": True, "currentId": current, "currentUrl": f"/api/errors/{current}",
            "page": f"/errors/{current}/", "reason": f"message {kind} in {release}" if kind == "edited"
            else f"{kind} to another file in {release}"}


def _site(s: RaiseSite) -> dict[str, Any]:
    """One raise site's facts. Its permalink is `githubUrl` with its own file and line (the
    record's `kb.ref`); its trigger in words is the record's `triggerScenarios` for the first."""
    return {
        "file": s.file,
        "line": s.line,
        "endLine": s.fact.end_line,
        "function": s.fact.qualname,
        "exception": s.fact.exception,
        "guard": s.fact.guard,
        "guardTerms": list(s.fact.guard_terms),
        "locals": [{"name": d.name, "source": d.source, "line": d.line} for d in s.fact.locals],
        "contexts": [{"kind": c.kind, "source": c.source, "line": c.line} for c in s.fact.contexts],
        "pydantic": {"class": s.fact.pydantic_class, "validation": s.fact.validation, "wrapped": s.pydantic_wrapped}
        if s.fact.pydantic_class or s.pydantic_wrapped else None,
        "excerptStart": s.excerpt.start,
        "excerptEnd": s.excerpt.end,
    }


def _fix_text(fix: Fix) -> str:
    """ErrLookup's exampleFix is one text: before, then after, then the config.json and GPU it assumes."""
    assumed = {**fix.model_config, **fix.hardware}
    tail = f"# assuming {json.dumps(assumed, sort_keys=True, ensure_ascii=False)}\n" if assumed else ""
    return f"# before\n{fix.before.strip()}\n# after\n{fix.after.strip()}\n{tail}"


def _kebab(name: str) -> str:
    """`VLLMValidationError` -> `vllm-validation-error`; underscores and digits of private
    classes (`_RemoteUnavailable`) do not make empty words."""
    words = re.findall(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+", name)
    return "-".join(w.lower() for w in words) or "error"


def record_files(record: Record, info: SiteInfo) -> list[tuple[str, str]]:
    """/api/errors/<id>: one record, for the site and the MkDocs plugin. It is written once (a
    `.json` twin doubled the API's size); hosts with rewrites also answer `<id>.json` (`_redirects`)."""
    return [(f"api/errors/{record.id}", compact_json(api_record(record, info)))]


CONFIG_API_FORMAT = "kb-config-api/1"
_CONFIG_DEFS = ("config", "flag", "env_var", "config_key", "request_field")


def config_schema() -> dict[str, Any]:
    """The schema of /api/config.json: the scan schema's `config` definitions under a small envelope."""
    scan = json.loads((SCHEMAS / "scan.schema.json").read_text(encoding="utf-8"))
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "config.schema.json",
        "title": "vLLM's configuration, read from its source: flags, environment variables, config.json keys, "
                 "request fields",
        "type": "object", "additionalProperties": False,
        "required": ["format", "release", "ref", "commit", "config"],
        "properties": {
            "format": {"const": CONFIG_API_FORMAT},
            "release": {"type": ["string", "null"]},
            "ref": {"type": "string"},
            "commit": {"type": ["string", "null"], "description": "null: not known (a folder outside git)"},
            "config": {"$ref": "#/$defs/config"},
        },
        "$defs": {name: scan["$defs"][name] for name in _CONFIG_DEFS},
    }


def config_api_files(model: Optional[ConfigModel], info: SiteInfo) -> Iterator[tuple[str, str]]:
    """/api/config.json (the whole configuration model of the release) and its schema; nothing
    when the scan carries no model."""
    if model is None:
        return
    yield "api/config.json", compact_json({"format": CONFIG_API_FORMAT, "release": info.tree.release,
                                           "ref": info.tree.ref, "commit": info.tree.commit,
                                           "config": model.to_json()})
    yield "api/config.schema.json", json.dumps(config_schema(), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def json_ld(record: Record, info: SiteInfo) -> str:
    """The error page's schema.org TechArticle, safe inside a <script> element (no `<`, `>` or
    `&` left raw: a scanned message cannot close the element)."""
    url = f"{info.site_url}/errors/{record.id}/" if info.site_url else f"/errors/{record.id}/"
    data = {"@context": "https://schema.org", "@type": "TechArticle", "headline": record.title[:110],
            "identifier": record.id, "url": url, "about": {"@type": "Thing", "name": record.exception_class},
            "description": (guidance(record).meaning or facts_sentence(record))[:500],
            "isPartOf": {"@type": "WebSite", "name": "vLLM Error KB"},
            "version": info.tree.release or info.tree.ref, "dateModified": info.tree.commit_date or None}
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def llms_txt(records: Sequence[Record], info: SiteInfo, url_scheme: bool = False) -> str:
    """/llms.txt (llmstxt.org): what the site is, its API, and every curated error with its page;
    with `url_scheme`, the error URLs the site answers (kb/site/urlmap.py)."""
    base = info.site_url or ""
    lines = [f"# vLLM Error KB: {info.label}", "",
             f"> Every error {info.label} raises, read from its source, with curated meaning, solutions and checks "
             "that run before launch. One page and one JSON record per error id.", "",
             "## API", "",
             f"- [{base}/api/errors/index.json]({base}/api/errors/index.json): every error id, class, message, file",
             f"- {base}/api/errors/<id>: one record (ErrLookup's ErrorEntry schema v2, with kb's facts)",
             f"- [{base}/{MATCH_INDEX}]({base}/{MATCH_INDEX}): the message templates kb explain matches (gzipped JSON)",
             f"- [{base}/{SEARCH_INDEX}]({base}/{SEARCH_INDEX}): the ranked word index (lunr 2.3.9) kb search reads "
             "(gzipped JSON)", ""]
    if url_scheme:
        lines += ["## Error pages", "",
                  f"- {base}/errors/<id>/: an error's page in {info.label}; /errors/<slug>/ leads to it too",
                  f"- {base}/<release>/errors/<id>/: an error's page for a release, as kb prints its links. This site "
                  f"describes {info.label}: any other release's URL leads to this release's page of the same error, an "
                  "id of an older release to the page that answers for it now, an id no page answers for to the search",
                  ""]
    lines += ["## Curated errors", ""]
    for r in sorted((r for r in records if r.curated), key=lambda r: (title_key(r.title), r.id)):
        meaning = " ".join((r.entry.meaning if r.entry is not None else "").split())
        first = meaning.split(". ")[0][:200].replace("[", "(").replace("]", ")")
        title = r.title.replace("[", "(").replace("]", ")").replace("\n", " ")
        lines.append(f"- [{title}]({base}/errors/{r.id}/): {first}")
    return "\n".join(lines) + "\n"


SLUGS = "api/slugs.json"


def slugs_json(records: Sequence[Record]) -> str:
    """/api/slugs.json: slug -> id. A slug's URL (/errors/<slug>/) has no file of its own (one per
    error doubled the site's file count): the site's 404 page and `kb serve` look it up here."""
    return compact_json({r.slug: r.id for r in sorted(records, key=lambda r: r.slug)})


def api_files(records: Sequence[Record], info: SiteInfo, wordings: Sequence[Wording] = (),
              search_box: bool = True, url_scheme: bool = False) -> Iterator[tuple[str, str | bytes]]:
    """The API files about all records together: the index of ids, the record schema and the
    match index that the site's lookup and `kb explain` read (with the older wordings), the word
    index (`kb search`) and, with `search_box`, its pieces the site's search box reads, and
    llms.txt. With `url_scheme` (a site that answers kb/site/urlmap.py's error URLs), the live
    page of each older id, read off the match index, and the scheme in llms.txt."""
    yield "llms.txt", llms_txt(records, info, url_scheme)
    yield "api/errors/index.json", compact_json({"release": info.tree.release, "ref": info.tree.ref, "errors": [
        {"id": r.id, "slug": r.slug, "class": r.exception_class, "message": r.template, "file": r.file,
         "line": r.line, "curated": r.curated, "removedSince": r.removed_since} for r in records]})
    yield SLUGS, slugs_json(records)
    yield "api/schema.json", (SCHEMAS / "record.schema.json").read_text(encoding="utf-8")
    index = match_index(records, info.tree.release, wordings)
    yield MATCH_INDEX, gzip_text(compact_json(index))
    if url_scheme:
        from kb.site.urlmap import older_id_files, older_ids

        yield from older_id_files(older_ids(index))
    words = search_index(records, info.tree.release)
    yield SEARCH_INDEX, gzip_text(compact_json(words))
    if search_box:
        yield from word_shards(words, records)  # the same index in pieces, for the site's search box
