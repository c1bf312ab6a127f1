"""`kb search`: the words of a query ranked over the search index, as the site's search box
ranks them (search.js builds the same lunr query from the same clauses)."""

from __future__ import annotations

import heapq
import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from kb.errors import KBError
from kb.files import read_text
from kb.search.index import SEARCH_FORMAT
from kb.search.words import Clause, clauses

if TYPE_CHECKING:
    from kb.explain.match import Found, Match, Matcher
    from kb.search.rank import Rows

MAX_LIMIT = 100
SEARCH_INDEX = "api/search-index.json.gz"  # in a built site; gzipped (0.33.0: 5.8 MB -> 1.6 MB), the browser unpacks it
MAX_SEARCH_INDEX_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True)
class Hit:
    id: str
    score: float
    title: str
    kind: str  # "words", or how the exact lookup matched ("exact", "contained", ...)
    preview: str = ""  # the start of what it means (plain text: the match index's), for `kb search`'s text


class SearchIndex:
    """A loaded search index: lunr's index and the titles by id. `index`: lunr's index already
    loaded (the answer store's, kb/search/store.py, with its `rows`), else loaded from `data`."""

    def __init__(self, data: dict[str, Any], index: Any = None, rows: Optional[Rows] = None) -> None:
        from kb.search.stem import register

        register()  # the index's pipeline names lunr.js's stemmer

        self.release: Optional[str] = data.get("release")
        self.docs: list[tuple[str, str]] = [(d[0], d[1]) for d in data["docs"]]
        self.titles: dict[str, str] = dict(self.docs)
        if index is None:
            from lunr.index import Index

            index = Index.load(data["index"])
        self.index = index
        self.vectors: dict[str, Optional[dict[int, float]]] = {}  # the field vectors ranked, kept (rank.py)
        self.rows = rows  # the field vectors by term, when the answer store has them (rank.py)

    def words(self, query: str, limit: int = 10) -> list[Hit]:
        """The errors whose words the query's words are, best first (score, then id)."""
        from lunr.query import Query

        from kb.search.rank import plain, ranked

        parts = clauses(query)
        if not parts:
            return []
        q = self.index.create_query()
        for c in parts:
            if c.prefix:
                q.term(c.term, boost=c.boost, use_pipeline=False, wildcard=Query.WILDCARD_TRAILING)
            else:
                q.term(c.term, boost=c.boost)
        if plain(q):  # lunr's arithmetic, faster (kb/search/rank.py)
            found = ranked(self.index, q, self.vectors, self.rows)
        else:
            found = [(m["ref"], m["score"], frozenset(m["match_data"].metadata)) for m in self.index.query(q)]
        words = max((n for c in parts for n in c.words), default=0) + 1
        forms = [(c, self.index.pipeline.run_string(c.term) if not c.prefix else [c.term]) for c in parts]
        shares: dict[frozenset[str], float] = {}  # by the terms a document holds: most hold the same few
        for _, _, held in found:
            if held not in shares:
                shares[held] = coordination(list(held), forms, words)
        hits = heapq.nsmallest(limit, ((score6(float(score) * shares[held]), self.docs[int(ref)][0])
                                       for ref, score, held in found), key=lambda x: (-x[0], x[1]))
        return [Hit(ident, score, self.titles[ident], "words") for score, ident in hits[:limit] if score > 0]


def score6(x: float) -> float:
    """A score to 6 decimals as the browser rounds it (`Math.round(x * 1e6) / 1e6`: a half goes
    up; Python's round() takes a half to the even digit, and coordination's quarters and
    sixteenths make halves)."""
    return math.floor(x * 1e6 + 0.5) / 1e6


def coordination(matched: list[str], forms: list[tuple[Clause, list[str]]], words: int) -> float:
    """The share of the query's words a document holds (through the word, its shorthand or, for
    a long word, a word it begins), squared: lunr sums each term over every field, so without it
    one word found in five fields outranks all the words found once (Lucene's `coord`)."""
    held: set[int] = set()
    for c, stems in forms:
        if any(t in stems or (c.prefix and t.startswith(c.term)) for t in matched):
            held.update(c.words)
    share = len(held) / words
    return share * share


class Searcher:
    """A paste that matches a template goes to the exact lookup first (its matches lead, as on
    the site), then the errors ranked by the query's words."""

    def __init__(self, words: SearchIndex, matcher: Matcher) -> None:
        self.words = words
        self.matcher = matcher
        self.release = words.release or ""

    def search(self, query: str, limit: int = 10) -> list[Hit]:
        from kb.explain.match import explain

        hits: list[Hit] = []
        for f in explain(query, self.matcher, suggest=False).found:  # an older wording leads to its successor's page
            m, ident = _with_page(f)
            if ident and all(h.id != ident for h in hits):
                hits.append(Hit(ident, float(m.score), self.words.titles.get(ident, str(m.entry["title"])), m.kind))
        for h in self.words.words(query, limit):
            if all(h.id != x.id for x in hits):
                hits.append(h)
        return [replace(h, preview=str(self.matcher.live[h.id].get("meaning") or "")) if h.id in self.matcher.live
                else h for h in hits[:limit]]


def _page(m: Match) -> str:
    return str(m.entry.get("page") or "") if m.entry.get("older") else m.id


def _with_page(f: Found) -> tuple[Match, str]:
    """The lookup's best match and the page it leads to: its first answer (the page of an error the
    release raises, kb/explain/match.py), else its own page. The words of an older wording raised
    in two files, one since removed (no page in this build) and one still raised, match both
    equally: the one with a page is the answer a list of pages can give."""
    if f.answer is not None:
        return f.best, f.answer.id
    page = _page(f.best)
    if not page:
        for m in f.others:
            if m.kind == f.best.kind and m.score == f.best.score and _page(m):
                return m, _page(m)
    return f.best, page


def load_search_index(path: Path) -> SearchIndex:
    return search_index_of(read_search_index(path), path)


def search_index_of(data: dict[str, Any], path: Path) -> SearchIndex:
    """The search index of checked data read from `path` (lunr loads it)."""
    try:
        return SearchIndex(data)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        raise KBError(f"not a search index: lunr cannot load it ({type(e).__name__})", str(path)) from None


def read_search_index(path: Path) -> dict[str, Any]:
    """A search index file, checked (index_problem); KBError, located, when it is not one."""
    try:
        data = json.loads(read_text(path, MAX_SEARCH_INDEX_BYTES))
    except FileNotFoundError:
        raise KBError("no search index there (build the site first, or leave out --site)", str(path)) from None
    except RecursionError:
        raise KBError("cannot read the search index: nested too deeply", str(path)) from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise KBError(f"cannot read the search index: {e}", str(path)) from None
    problem = index_problem(data)
    if problem:
        raise KBError(f"not a search index: {problem}", str(path))
    assert isinstance(data, dict)
    return data


def index_problem(data: object) -> Optional[str]:
    if not isinstance(data, dict):
        return "a JSON object is expected"
    if data.get("format") != SEARCH_FORMAT:
        return f"its format is {str(data.get('format'))[:40]!r}, not {SEARCH_FORMAT!r}"
    docs, index = data.get("docs"), data.get("index")
    if not isinstance(docs, list) or not all(isinstance(d, list) and len(d) == 2 and all(isinstance(x, str) for x in d)
                                             for d in docs):
        return "'docs' must list [id, title] pairs"
    if not isinstance(index, dict) or not isinstance(index.get("invertedIndex"), list):
        return "'index' must be a serialized lunr index"
    refs = index.get("fieldVectors")
    if not isinstance(refs, list) or not all(
            isinstance(v, list) and v and isinstance(v[0], str) and v[0].rpartition("/")[2].isdigit()
            and int(v[0].rpartition("/")[2]) < len(docs) for v in refs):
        return "'index' refers to documents 'docs' does not list"
    return None


def hits_dict(release: str, hits: list[Hit], site_url: Optional[str] = None) -> dict[str, Any]:
    """`kb search --json` (and the MCP tool `search_errors`): the results in rank order."""
    from kb.urls import error_url

    return {"release": release, "results": [
        {"id": h.id, "score": h.score, "title": h.title, "url": error_url(h.id, site_url, release), "kind": h.kind}
        for h in hits]}


def hits_json(release: str, hits: list[Hit], site_url: Optional[str] = None) -> str:
    return json.dumps(hits_dict(release, hits, site_url), indent=2, ensure_ascii=False) + "\n"


def hits_text(release: str, hits: list[Hit], site_url: Optional[str] = None) -> str:
    """Each result: its title, the start of what it means (a sentence, plain text), its id and page."""
    from kb.explain.output import ABSOLUTE_HINT
    from kb.explain.prose import PREVIEW_CHARS, lead
    from kb.urls import error_url

    if not hits:
        return f"vLLM {release}: no error matches these words. Try fewer words, or other ones.\n"
    lines = [f"vLLM {release}: {len(hits)} error{'s' if len(hits) != 1 else ''}, best first"]
    for n, h in enumerate(hits, 1):
        how = "" if h.kind == "words" else f"  [your text matches this message: {h.kind}]"
        lines.append(f"{n:3}. {h.title}{how}")
        if h.preview:
            lines.append(f"     {lead(h.preview, PREVIEW_CHARS)[0]}")
        lines.append(f"     {h.id}  {error_url(h.id, site_url, release)}")
    return "\n".join(lines + ([] if site_url else ["", ABSOLUTE_HINT])) + "\n"
