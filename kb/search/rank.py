"""lunr's query (lunr.py's `Index.query`) for the queries kb makes: every clause optional, a word
or a word with a trailing wildcard, no edit distance. The same arithmetic in the same order, so
each document's score is the same float, without lunr's bookkeeping for every match (a match
record copied, a field reference parsed, for each field a term is found in): a query of common
words ("max model len") matches most documents, and lunr spends 4x longer on them than this.

Per field, the query vector adds each clause's boost at each expanded term's index, clause by
clause; each matching (document, field) scores the dot product of that vector with the field's
vector (over the common indices in ascending order) divided by the query vector's magnitude;
a document's score is the sum over its matching fields, in the order lunr first met them."""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from math import sqrt
from typing import Any, Optional, Protocol

Found = tuple[str, float, frozenset[str]]  # a document's ref, its score, the terms it holds


def plain(query: Any) -> bool:
    """Whether lunr's query is one this module answers as lunr does (else lunr's own runs)."""
    from lunr.query import QueryPresence

    return all(c.presence == QueryPresence.OPTIONAL and not c.edit_distance for c in query.clauses) \
        and bool(query.clauses)


class Rows(Protocol):
    """The field vectors by term (the answer store's, kb/search/store.py): for a term's index, each
    field's documents and weights as [ref, weight, ref, weight, ...]; and the field references
    whose vector is zero."""

    @property
    def zero(self) -> Container[str]: ...

    def __getitem__(self, at: int) -> Mapping[str, Sequence[Any]]: ...


def ranked(index: Any, query: Any, vectors: dict[str, Optional[dict[int, float]]],
           rows: Optional[Rows] = None) -> list[Found]:
    """Every document matching a `plain` query, in the order lunr first meets it. The dot products
    come from `rows` when given (a term's row holds every document it weighs in: the work is the
    matches, not the documents' words), else from the field vectors, each kept in `vectors` as a
    dict (None: a zero vector) from one query to the next."""
    from lunr.token_set import TokenSet

    fields = list(index.fields)
    boosts: dict[str, dict[int, float]] = {f: {} for f in fields}
    matching: dict[str, tuple[str, str]] = {}  # "field/ref" -> (field, ref), in the order first met
    terms: dict[str, set[str]] = {}
    seen: set[str] = set()
    for clause in query.clauses:
        words = index.pipeline.run_string(clause.term, {"fields": clause.fields}) if clause.use_pipeline \
            else [clause.term]
        for word in words:
            clause.term = word  # as lunr does: the clause carries each of the pipeline's terms in turn
            for term in index.token_set.intersect(TokenSet.from_clause(clause)).to_list():
                posting = index.inverted_index[term]
                at = posting["_index"]
                for field in clause.fields:
                    boost = boosts[field]
                    boost[at] = boost[at] + clause.boost if at in boost else clause.boost
                    if term + "/" + field in seen:
                        continue
                    seen.add(term + "/" + field)
                    for ref in posting[field]:
                        matching.setdefault(field + "/" + ref, (field, ref))
                        terms.setdefault(ref, set()).add(term)
    weights = {f: sorted(b.items()) for f, b in boosts.items()}  # in the order of the indices
    magnitudes = {f: _magnitude(w) for f, w in weights.items()}
    if rows is not None:
        dots = _by_rows(weights, rows)
    scores: dict[str, float] = {}
    for key, (field, ref) in matching.items():
        magnitude = magnitudes[field]
        score = 0.0
        if rows is not None:
            if magnitude and key not in rows.zero:
                score = dots[field].get(ref, 0) / magnitude
        elif magnitude:
            score = _by_vector(index, key, weights[field], boosts[field], vectors) / magnitude
        scores[ref] = scores[ref] + score if ref in scores else score
    return [(ref, score, frozenset(terms[ref])) for ref, score in scores.items()]


def _by_rows(weights: dict[str, list[tuple[int, float]]], rows: Rows) -> dict[str, dict[str, float]]:
    """field -> ref -> the dot product of the query's vector and the document's field vector: the
    products summed over the common indices in ascending order, from 0, as lunr's Vector.dot."""
    dots: dict[str, dict[str, float]] = {}
    for field, by_index in weights.items():
        dot: dict[str, float] = dots.setdefault(field, {})
        for at, weight in by_index:
            row = rows[at].get(field, ())
            for n in range(0, len(row), 2):
                ref = row[n]
                dot[ref] = dot.get(ref, 0) + weight * row[n + 1]
    return dots


def _by_vector(index: Any, key: str, weights: list[tuple[int, float]], boost: dict[int, float],
               vectors: dict[str, Optional[dict[int, float]]]) -> float:
    """The dot product of the query's vector and one field vector (0 when that is zero)."""
    if key not in vectors:
        elements = index.field_vectors[key].elements
        read = dict(zip(elements[::2], elements[1::2]))
        vectors[key] = read if _magnitude(list(read.items())) else None
    vector = vectors[key]
    dot: float = 0
    if vector is None:
        return dot
    # over the common indices in ascending order (a vector's are), through the shorter of the two
    if len(weights) <= len(vector):
        for at, weight in weights:
            value = vector.get(at)
            if value is not None:
                dot += weight * value
    else:
        for at, value in vector.items():
            asked = boost.get(at)
            if asked is not None:
                dot += asked * value
    return dot


def _magnitude(elements: list[tuple[int, float]]) -> float:
    """As lunr's Vector.magnitude: the squares summed in the order of the indices (as given)."""
    squares: float = 0
    for _, value in elements:
        squares += value * value
    return sqrt(squares)
