"""The search index in the answer store (kb/store.py), read by lunr's own query code without
loading the whole index: each term's postings and each field vector are parsed when a query
reaches them, and the token set a query is intersected with holds only the terms it can match
(a word, or the words a prefix begins), built by lunr from those terms. Loading lunr's whole index
(its token set of every term, every vector) takes longer than answering."""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Optional

from kb.search.query import SearchIndex
from kb.store import Sections, Store, Table

KIND = "search"


def search_sections(data: dict[str, Any]) -> Sections:
    """The sections of a search index checked by kb.search.query.index_problem."""
    index = data["index"]
    terms = [t for t, _ in index["invertedIndex"]]
    if terms != sorted(terms):
        raise ValueError("the index's terms are not sorted")
    s = Sections()
    s.add("head", {k: v for k, v in data.items() if k != "index"} | {
        "lunr": {"version": index.get("version"), "fields": index["fields"], "pipeline": index["pipeline"]}})
    s.add("terms", terms)
    s.table("postings", [p for _, p in index["invertedIndex"]])
    s.add("vectorRefs", [ref for ref, _ in index["fieldVectors"]])
    s.table("vectors", [v for _, v in index["fieldVectors"]])
    rows, zero = by_term(index)
    s.table("rows", rows)
    s.add("zero", zero)
    return s


def by_term(index: dict[str, Any]) -> tuple[list[dict[str, list[Any]]], list[str]]:
    """The field vectors turned around (kb/search/rank.py Rows): for each term's index, each field's
    documents with their weights; and the field references whose vector is zero (lunr's magnitude)."""
    from lunr.vector import Vector

    rows: list[dict[str, list[Any]]] = [{} for _ in range(1 + max((p["_index"] for _, p in index["invertedIndex"]),
                                                                   default=-1))]
    zero = []
    for key, elements in index["fieldVectors"]:
        field, _, ref = key.partition("/")
        for n in range(0, len(elements), 2):
            rows[elements[n]].setdefault(field, []).extend((ref, elements[n + 1]))
        if Vector(list(elements)).magnitude == 0:
            zero.append(key)
    return rows, zero


def stored_search_index(store: Store) -> SearchIndex:
    """The search index of a store. ValueError, TypeError, KeyError or IndexError: not one kb compiled."""
    from lunr.index import Index
    from lunr.pipeline import Pipeline

    from kb.search.stem import register

    register()  # before the pipeline is loaded: it names lunr.js's stemmer
    head = store.json("head")
    lunr = head["lunr"]
    terms = store.json("terms")
    postings, refs, vectors = store.table("postings"), store.json("vectorRefs"), store.table("vectors")
    if len(postings) != len(terms) or len(vectors) != len(refs) or not all(isinstance(t, str) for t in terms):
        raise ValueError("the tables do not fit the terms")
    rows = store.table("rows")
    if len(rows) != len(terms):
        raise ValueError("the rows do not fit the terms")
    index = Index(fields=lunr["fields"], field_vectors=Vectors(refs, vectors), inverted_index=Postings(terms, postings),
                  token_set=Terms(terms), pipeline=Pipeline.load(lunr["pipeline"]))
    return SearchIndex(head, index, StoredRows(rows, store.json("zero")))


class StoredRows:
    """kb/search/rank.py's Rows: a term's row parsed when a query first has the term."""

    def __init__(self, table: Table, zero: list[str]) -> None:
        self.table, self.zero = table, frozenset(zero)

    def __getitem__(self, at: int) -> Mapping[str, Sequence[Any]]:
        row: Mapping[str, Sequence[Any]] = self.table[at]
        return row


def _position(terms: Sequence[str], term: str) -> Optional[int]:
    n = bisect.bisect_left(terms, term)
    return n if n < len(terms) and terms[n] == term else None


class Postings(Mapping[str, Any]):
    """term -> its postings, as lunr's inverted index holds them."""

    def __init__(self, terms: list[str], table: Table) -> None:
        self.terms, self.table = terms, table

    def __getitem__(self, term: str) -> Any:
        n = _position(self.terms, term)
        if n is None:
            raise KeyError(term)
        return self.table[n]

    def __iter__(self) -> Iterator[str]:
        return iter(self.terms)

    def __len__(self) -> int:
        return len(self.terms)


class Vectors(Mapping[str, Any]):
    """"<doc ref>/<field>" -> its lunr Vector, made when first asked for."""

    def __init__(self, refs: list[str], table: Table) -> None:
        self.refs, self.table = refs, table
        self._at: Optional[dict[str, int]] = None
        self._made: dict[str, Any] = {}

    def __getitem__(self, ref: str) -> Any:
        if ref not in self._made:
            from lunr.vector import Vector

            if self._at is None:
                self._at = {r: n for n, r in enumerate(self.refs)}
            self._made[ref] = Vector(self.table[self._at[ref]])
        return self._made[ref]

    def __iter__(self) -> Iterator[str]:
        return iter(self.refs)

    def __len__(self) -> int:
        return len(self.refs)


class Terms:
    """Stands in for lunr's token set of every term: `intersect` gives what lunr's would (the same
    terms, in the same order) from the token set of the terms the query can match, a query of one
    word or of a word and a trailing wildcard; any other query is intersected with the whole set."""

    def __init__(self, terms: list[str]) -> None:
        self.terms = terms
        self._whole: Any = None

    def intersect(self, query: Any) -> Any:
        from lunr.token_set import TokenSet

        found = self.matchable(query)
        if found is None:
            if self._whole is None:
                self._whole = TokenSet.from_list(self.terms)
            return self._whole.intersect(query)
        return TokenSet.from_list(found).intersect(query)

    def matchable(self, query: Any) -> Optional[list[str]]:
        """The terms a query's token set can match, or None when it is not a word or a prefix."""
        word: list[str] = []
        node = query
        while node.edges:
            if len(node.edges) != 1:
                return None
            ((label, following),) = node.edges.items()
            if label == "*":
                if following is not node or not word:
                    return None
                prefix = "".join(word)
                start = bisect.bisect_left(self.terms, prefix)
                end = start
                while end < len(self.terms) and self.terms[end].startswith(prefix):
                    end += 1
                return self.terms[start:end]
            word.append(label)
            node = following
        n = _position(self.terms, "".join(word))
        return [self.terms[n]] if n is not None else []
