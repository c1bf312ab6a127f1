"""The word index in pieces, for the site's search box: a small head (the query settings, the
synonyms, lunr's fields and pipeline, the ids by ref, where each range of terms is) and the terms
in buckets of consecutive terms, each with its postings and its weight in each document's field
vector; and one piece with what the results list shows of each document (its title, class, file,
line, whether curated), read before the match index is in. A query needs the buckets of its terms
only (about 15 KB gzipped each, against 1.9 MB for the whole index on 0.34.0); lunr.js builds an
index of the loaded buckets and ranks as over the whole one: a document's score is the dot
product of the query's vector with the document's field vectors, which only the query's terms
reach.

`kb search` reads the whole index (`api/search-index.json.gz`), written from the same data."""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Iterator, Sequence
from typing import Any

from kb.files import compact_json, gzip_text
from kb.model import Record

WORDS_FORMAT = "kb-search-words/1"
WORDS_HEAD = "api/search-words.json.gz"
PIECES = "search-words"  # the folder of the pieces, beside the head: api/search-words/<digest>.json.gz
BUCKET_CHARS = 48_000  # JSON characters a bucket grows to before the next term starts another


def _named(obj: Any) -> tuple[str, bytes]:
    """A piece's path beside the head (its name from its content: a browser never mixes pieces of
    two builds) and its bytes."""
    text = compact_json(obj).encode("utf-8")
    name = f"{PIECES}/{hashlib.sha256(text).hexdigest()[:16]}.json.gz"
    return name, gzip.compress(text, compresslevel=6, mtime=0)


def _rows(index: dict[str, Any]) -> Iterator[list[Any]]:
    """Each term, in order: [term, its number, then per field its postings: doc, weight, ...]."""
    fields: list[str] = index["fields"]
    column = {f: k for k, f in enumerate(fields)}
    postings: dict[int, list[list[tuple[int, float]]]] = {}
    for ref, elements in index["fieldVectors"]:  # "field/doc": [term number, weight, ...]
        field, _, doc = str(ref).rpartition("/")
        k, d = column[field], int(doc)
        for n, w in zip(elements[0::2], elements[1::2]):
            lists = postings.get(n)
            if lists is None:
                lists = postings[n] = [[] for _ in fields]
            lists[k].append((d, w))
    for term, posting in sorted(index["invertedIndex"], key=lambda x: str(x[0])):
        n = posting["_index"]
        yield [term, n, *([x for pair in sorted(docs) for x in pair] for docs in postings.get(n, [[] for _ in fields]))]


def _shown(data: dict[str, Any], records: Sequence[Record]) -> dict[str, Any]:
    """What a results list shows of each document besides its page: its title, class, file, line
    and whether it is curated, as the match index gives them; the box lists word results with
    these before the match index (six times the bytes) is in. Files by number: 1,500 paths."""
    by_id = {r.id: r for r in records if r.removed_since is None}
    rows = [by_id[d[0]] for d in data["docs"]]
    files = sorted({r.file for r in rows})
    number = {f: n for n, f in enumerate(files)}
    return {"format": WORDS_FORMAT, "titles": [d[1] for d in data["docs"]], "files": files,
            "where": [[r.exception_class, number[r.file], r.line, int(r.curated)] for r in rows]}


def word_shards(data: dict[str, Any], records: Sequence[Record]) -> Iterator[tuple[str, bytes]]:
    """The head and the buckets of a search index (kb.search.index.search_index of `records`), and
    what the results list shows of each document, as site files."""
    buckets: list[tuple[str, str]] = []
    pieces: list[tuple[str, bytes]] = []
    rows: list[list[Any]] = []
    size = 0

    def close() -> None:
        name, blob = _named({"format": WORDS_FORMAT, "terms": rows})
        buckets.append(("" if not buckets else str(rows[0][0]), name))  # the first from "": every term has one
        pieces.append((f"api/{name}", blob))

    for row in _rows(data["index"]):
        if rows and size >= BUCKET_CHARS:
            close()
            rows, size = [], 0
        rows.append(row)
        size += len(row[0]) + 6 * sum(len(p) for p in row[2:])  # about its JSON's length
    if rows or not buckets:
        close()
    titles, blob = _named(_shown(data, records))
    pieces.append((f"api/{titles}", blob))
    index = data["index"]
    head = {"format": WORDS_FORMAT, "release": data["release"], "settings": data["settings"],
            "synonyms": data["synonyms"], "version": index["version"], "fields": index["fields"],
            "pipeline": index["pipeline"], "docs": [d[0] for d in data["docs"]],
            "buckets": [list(b) for b in buckets], "titles": titles}
    yield WORDS_HEAD, gzip_text(compact_json(head))
    yield from pieces
