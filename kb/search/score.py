"""hit@k and MRR of a labelled query set: what `bench/search.py` prints and the release test
holds the search to."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kb.errors import KBError


@dataclass(frozen=True)
class Query:
    text: str
    accept: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class Scores:
    n: int
    hit1: float
    hit3: float
    mrr: float
    misses: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...]  # query, accepted, top 3 given


def load_queries(path: Path) -> list[Query]:
    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise KBError(f"cannot read the query set: {e}", str(path)) from None
    out = []
    for n, q in enumerate(data.get("queries", []) if isinstance(data, dict) else []):
        if not isinstance(q, dict) or not isinstance(q.get("query"), str) or not isinstance(q.get("accept"), list):
            raise KBError(f"query {n}: needs 'query' (text) and 'accept' (ids)", str(path))
        out.append(Query(q["query"], tuple(str(a) for a in q["accept"]), str(q.get("source", ""))))
    return out


def score(queries: Sequence[Query], rank: Callable[[str], list[str]]) -> Scores:
    """`rank`: the ids a search gives for a query, best first."""
    hit1 = hit3 = 0
    mrr = 0.0
    misses = []
    for q in queries:
        got = rank(q.text)
        place = next((i for i, ident in enumerate(got) if ident in q.accept), None)
        hit1 += place == 0
        hit3 += place is not None and place < 3
        mrr += 1 / (place + 1) if place is not None else 0.0
        if place is None or place >= 3:
            misses.append((q.text, q.accept, tuple(got[:3])))
    n = len(queries)
    return Scores(n, hit1 / n if n else 0.0, hit3 / n if n else 0.0, mrr / n if n else 0.0, tuple(misses))
