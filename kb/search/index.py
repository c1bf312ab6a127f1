"""The search index: one document per error the release raises, its fields weighted, built
with lunr (lunr.py writes the index lunr.js reads) into `/api/search-index.json.gz`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kb.files import compact_json
from kb.model import Record
from kb.search.words import (
    MAX_QUERY_CHARS,
    MAX_QUERY_TERMS,
    PREFIX_BOOST,
    PREFIX_MIN,
    SYNONYM_BOOST,
    SYNONYMS,
    document_text,
)

SEARCH_FORMAT = "kb-search/1"

# The fields of a document and their weights: the words of the title count most, then the
# message and the names that set the error (flags, config.json keys, environment variables, the
# curated entry's slug), then the titles of public reports that quote it (the words users with
# the same problem wrote), the curated prose and where in the source it is raised.
FIELDS: tuple[tuple[str, int], ...] = (("title", 6), ("message", 3), ("names", 3), ("reports", 2), ("text", 1),
                                       ("code", 1))
# A curated error is one users reach, and each public report that shows it (cited by its entry, or
# in errors/reports/) is one more user who did: both raise it above an error of the same words.
CURATED_BOOST = 1.3
REPORT_BOOST = 0.1
MAX_REPORTS = 8


def boost(r: Record) -> float:
    from kb.records.reports import thread  # only a build needs it: `kb search` reads SEARCH_FORMAT here

    urls = [rep.url for rep in r.reports] + list(r.entry.references if r.entry is not None else ())
    reports = {thread(u) for u in urls}  # one GitHub thread once, however its URL is written
    return (CURATED_BOOST if r.entry is not None else 1.0) + REPORT_BOOST * min(len(reports), MAX_REPORTS)


def _title_words(r: Record) -> list[str]:
    """The title; for a message built at run time (`{' '.join(errors)}`), whose title names only
    the function, the messages it is built from."""
    from kb.records.present import without_text

    parts = [p for s in r.sites for p in s.fact.parts]
    return [r.title, *parts] if parts and without_text(r.template) else [r.title]


def _names(r: Record) -> list[str]:
    names: list[str] = []
    if r.setby is not None:
        names += [i.key for i in (*r.setby.inputs, *r.setby.earlier) if i.resolved]
    e = r.entry
    if e is not None:
        names.append(e.path.rsplit("/", 1)[-1].removesuffix(".yaml"))
        if e.check is not None:
            names += list(e.check.inputs)
    return names


def document(r: Record, ref: str) -> dict[str, str]:
    """The words of one error by field; `ref` is its number in the index (lunr lists each
    document under its ref for every word: a 16-character id would be most of the file)."""
    e = r.entry
    prose = [e.meaning, *e.solutions, e.trigger, *(s.text for s in e.common_situations)] if e is not None else []
    return {
        "ref": ref,
        "title": document_text(*_title_words(r)),
        "message": document_text(r.template, *(p for s in r.sites for p in s.fact.parts)),
        "names": document_text(*_names(r)),
        "reports": document_text(*(rep.title for rep in r.reports)),
        "text": document_text(*prose),
        "code": document_text(r.exception_class, r.sites[0].fact.qualname, r.file, r.subsystem),
    }


# lunr's English stop words drop "not", "no", "cannot", "only", "must", "least", "too": half of
# what an error message says ("not supported", "at least 1", "too small"). Only these go.
STOP_WORDS = ("a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "have", "in", "into", "is", "it",
              "its", "of", "on", "or", "that", "the", "their", "then", "there", "these", "this", "to", "was", "were",
              "which", "with", "you", "your")


_STOP = frozenset(STOP_WORDS)


def _drop_stop_words(token: Any, i: int, tokens: Any) -> Any:
    return None if str(token) in _STOP else token


def stop_words() -> Any:
    """The pipeline step that drops STOP_WORDS (registered under its own name, as lunr needs for
    a step of the build pipeline; the search pipeline, which the index carries, is the stemmer)."""
    from lunr.pipeline import Pipeline

    if "kbStopWords" not in Pipeline.registered_functions:
        Pipeline.register_function(_drop_stop_words, "kbStopWords")
    return Pipeline.registered_functions["kbStopWords"]


def search_index(records: Sequence[Record], release: str | None) -> dict[str, Any]:
    """The index of the errors `records` raise (removed ones are left out), with what a reader
    needs to query it as kb does: the synonym table and the query settings."""
    from lunr.trimmer import trimmer

    from kb.search.builder import FastBuilder
    from kb.search.stem import register

    stemmer = register()

    current = sorted((r for r in records if r.removed_since is None), key=lambda r: r.id)
    builder = FastBuilder()  # lunr's Builder, each word's terms computed once
    builder.pipeline.add(trimmer, stop_words(), stemmer)
    builder.search_pipeline.add(stemmer)
    builder.ref("ref")
    for name, weight in FIELDS:
        builder.field(name, boost=weight)
    for n, r in enumerate(current):
        builder.add(document(r, str(n)), {"boost": boost(r)})
    return {
        "format": SEARCH_FORMAT,
        "release": release,
        "settings": {"maxChars": MAX_QUERY_CHARS, "maxTerms": MAX_QUERY_TERMS, "prefixMin": PREFIX_MIN,
                     "prefixBoost": PREFIX_BOOST,
                     "synonymBoost": SYNONYM_BOOST},
        "synonyms": {k: list(v) for k, v in sorted(SYNONYMS.items())},
        "docs": [[r.id, r.title] for r in current],  # by ref: the n-th document is docs[n]
        "index": builder.build().serialize(),
    }


def search_index_json(records: Sequence[Record], release: str | None) -> str:
    """The file `/api/search-index.json.gz`, as the site's search box and `kb search` read it."""
    return compact_json(search_index(records, release))
