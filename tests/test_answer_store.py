"""The answer store (kb/store.py): `kb explain` and `kb search` compile a release wheel's answers
once into the cache and answer from them warm, byte for byte as from a scan, without scanning;
a changed input compiles a new store; a damaged or foreign one is compiled again, never used."""

from __future__ import annotations

import gc
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from entryhelpers import write_entries
from kb.cli import main
from kb.explain.match import Matcher, explain, load_index
from kb.scan.source import SourceSpec
from kb.search.query import Searcher, load_search_index
from kb.store import MAGIC, Sections, read_store, write_store

PASTES = [
    "ERROR 01-02 03:04:05 [core.py:1] ValueError: Total number of attention heads (32) must be divisible by tensor "
    "parallel size (3).",
    "Value error, max_model_len must be non-negative, got -1 [type=value_error, input_value=-1]",
    "The model's number of query heads per KV head (4) must be divisible by",  # cut off
    "total number of attention heads (32) must be divisible by tensor parallel size (3).",  # lower case
    "unknown kind: zebra",
    "nothing kb knows of heads or kinds",  # no match: suggestions
]
QUERIES = ["attention heads divisible", "tp heads", "quant", "max model len negative", PASTES[0], "zzzz"]


def answers(capsys: pytest.CaptureFixture[str], *args: str) -> list[tuple[int, str]]:
    """What `kb explain` and `kb search` print (text and --json) for every paste and query."""
    out = []
    for command, texts in (("explain", PASTES), ("search", QUERIES)):
        for text in texts:
            for extra in ([], ["--json"]):
                code = main([command, *args, *extra, text])
                out.append((code, capsys.readouterr().out))
    return out


def stores(cache: Path) -> list[Path]:
    return sorted((cache / "answers").glob("*")) if (cache / "answers").is_dir() else []


@pytest.fixture
def wheel_args(fixture_wheel: Path, tmp_path: Path) -> list[str]:
    return ["--wheel", str(fixture_wheel), "--errors", str(write_entries(tmp_path / "errors", {}))]


def test_a_warm_answer_comes_from_the_store_without_a_scan_and_is_the_same(
        wheel_args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    cache = Path(os.environ["KB_CACHE_DIR"])
    cold = answers(capsys, *wheel_args)
    assert [p.suffix for p in stores(cache)] == [".match", ".search"]
    assert cold[0][0] == 0 and "vllm/config/model.py" in cold[0][1] and cold[-1][0] == 1

    def no_scan(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a warm answer scanned the tree")

    monkeypatch.setattr("kb.jobs.scan_release", no_scan)
    monkeypatch.setattr("kb.jobs.match_index_for", no_scan)
    monkeypatch.setattr("kb.jobs.search_index_for", no_scan)
    assert answers(capsys, *wheel_args) == cold


def test_the_store_answers_as_the_index_it_was_compiled_from(
        wheel_args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Every paste and query, matched and ranked by the store and by lunr and the matcher over the
    cached JSON indexes (what kb answered from before)."""
    from kb.jobs import match_index_for, matcher_for, search_index_for, searcher_for

    spec = SourceSpec(wheel=wheel_args[1])
    errors = Path(wheel_args[3])
    matcher_for(spec, errors), searcher_for(spec, errors=errors)  # compiled
    stored = searcher_for(spec, errors=errors)
    assert type(stored.matcher.index["entries"]).__name__ == "Table"  # read from the store
    plain = Searcher(load_search_index(search_index_for(spec, errors)),
                     Matcher(load_index(match_index_for(spec, errors))))
    for text in [*PASTES, *QUERIES, "heads", "tensor parallel", "kind zebra", "divisible by size"]:
        assert repr(explain(text, stored.matcher)) == repr(explain(text, plain.matcher))
        assert stored.search(text, 20) == plain.search(text, 20)


def test_a_changed_input_compiles_a_new_store(wheel_args: list[str], fixture_wheel: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    cache = Path(os.environ["KB_CACHE_DIR"])
    assert main(["explain", *wheel_args, PASTES[0]]) == 0
    first = stores(cache)
    assert len(first) == 1 and first[0].name.startswith("0.1.0-")
    (Path(wheel_args[3]) / "README.md").write_text("a new file in the curated entries\n", encoding="utf-8")
    assert main(["explain", *wheel_args, PASTES[0]]) == 0
    second = stores(cache)
    assert len(second) == 2
    st = fixture_wheel.stat()
    os.utime(fixture_wheel, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a wheel downloaded again
    assert main(["explain", *wheel_args, PASTES[0]]) == 0
    assert len(stores(cache)) == 3
    capsys.readouterr()


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[:len(data) // 2])
    elif how == "a byte changed":
        path.write_bytes(data[:-10] + bytes([data[-10] ^ 1]) + data[-9:])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "not kb's":
        path.write_bytes(b"\x80\x04\x95 a pickle, never loaded" * 100)
    elif how == "a folder":
        path.unlink()
        (path / "inside").mkdir(parents=True)
    elif how in ("another key", "sections that do not fit"):  # a well-formed file, digest and all
        first = data.index(b"\n")
        body = data[first + 1:]
        if how == "another key":
            body = body.replace(b'"key":"', b'"key":"0', 1)
        else:
            header, _, blob = body.partition(b"\n")
            ranges = json.loads(header)["sections"]
            start, end = ranges["head"]
            head = json.loads(blob[start:end])
            head["entries"] += 1
            new = json.dumps(head, separators=(",", ":")).encode()
            blob = blob[:start] + new + blob[end:]
            shift = len(new) - (end - start)
            ranges = {k: [a + shift * (a > start), b + shift * (b > start)] for k, (a, b) in ranges.items()}
            body = json.dumps({**json.loads(header), "sections": ranges}, separators=(",", ":")).encode() + b"\n" + blob
        path.write_bytes(MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body)


@pytest.mark.parametrize("how", ["truncated", "a byte changed", "empty", "not kb's", "a folder", "another key",
                                 "sections that do not fit"])
def test_a_damaged_or_foreign_store_is_compiled_again(how: str, wheel_args: list[str],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    cache = Path(os.environ["KB_CACHE_DIR"])
    assert main(["explain", "--json", *wheel_args, PASTES[0]]) == 0
    good = capsys.readouterr().out
    (path,) = stores(cache)
    intact = path.read_bytes()
    _damage(path, how)
    assert main(["explain", "--json", *wheel_args, PASTES[0]]) == 0
    out, err = capsys.readouterr()
    assert out == good and err == ""
    assert path.is_file() and path.read_bytes() == intact  # compiled again, the same


def test_a_table_reads_one_item_as_all_of_them_do(tmp_path: Path) -> None:
    items: list[Any] = [{"a": 1, "b": [1, 2]}, "x", [], {"ü": "\n,]"}, None, 3.5]
    sections = Sections()
    sections.table("t", items)
    sections.add("one", {"z": 1, "a": 2})
    write_store(tmp_path / "s.kind", "kind", "key", sections)
    store = read_store(tmp_path / "s.kind", "kind", "key")
    assert store is not None and list(store.json("one")) == ["z", "a"]  # keys in their order
    table = store.table("t")
    assert [table[n] for n in range(len(items))] == items  # one at a time
    assert list(store.table("t")) == items  # all at once
    assert table[-1] == 3.5 and table[1:3] == ["x", []]
    assert read_store(tmp_path / "s.kind", "other kind", "key") is None and not (tmp_path / "s.kind").exists()


def test_the_stored_token_set_gives_lunrs_terms_in_lunrs_order() -> None:
    """kb/search/store.py intersects a query with the terms it can match; lunr's token set of
    every term must give the same terms in the same order for every word, prefix and fuzzy query."""
    from lunr.token_set import TokenSet

    from kb.search.store import Terms

    terms = sorted({"quant", "quantization", "quantized", "quanto", "qua", "heads", "head", "header", "tensor",
                    "tensors", "tp", "parallel", "parallelism", "pipeline", "a", "ab", "abc", "abd", "b", "zebra",
                    "8", "80gb", "q", "qa", "qb", "quantizations"})
    whole = TokenSet.from_list(terms)
    stored = Terms(terms)
    queries = [*terms, *(t[:k] + "*" for t in terms for k in range(1, len(t) + 1)), "zzz", "zzz*", "quantz*", "*",
               "q*a", "*ead", "he*d"]
    for q in queries:
        query = TokenSet.from_string(q)
        assert stored.intersect(query).to_list() == whole.intersect(query).to_list(), q
    for word in ("head", "quanto", "tesnor"):
        fuzzy = TokenSet.from_fuzzy_string(word, 1)
        assert stored.intersect(fuzzy).to_list() == whole.intersect(fuzzy).to_list()


def test_the_mcp_tools_load_a_release_once_and_keep_it(fixture_wheel: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """`kb mcp` answers every call from the release it loaded (at start: `preload`), never
    loading the match index or the search index again; its answers are the CLI's."""
    pytest.importorskip("mcp")
    import kb.jobs
    from kb.agent.mcp_server import Releases, tools
    from kb.explain.output import explanation_json
    from kb.search.query import hits_dict

    errors = write_entries(tmp_path / "errors", {})
    spec = SourceSpec(wheel=str(fixture_wheel))
    loads: list[str] = []
    for name in ("matcher_for", "searcher_for", "scan_release"):
        real = getattr(kb.jobs, name)
        monkeypatch.setattr(kb.jobs, name, lambda *a, _real=real, _name=name, **k: loads.append(_name) or _real(*a, **k))
    releases = Releases(spec, errors)
    try:
        releases.preload()
    finally:
        gc.unfreeze()  # preload keeps what it loaded out of the collector's walks: not in the test process
    assert sorted(set(loads)) == ["matcher_for", "scan_release", "searcher_for"]  # cold: compiled once
    loads.clear()
    table = tools(releases)
    for _ in range(3):
        explained = table["explain"](PASTES[0])
        found = table["search_errors"](QUERIES[0])
    assert loads == []
    assert explained == {"release": str(fixture_wheel),
                         **json.loads(explanation_json(kb.jobs.explain_text(PASTES[0], spec, errors=errors)))}
    # as `kb search --json` answers (its pages those of the release the index is for), the release named as given
    release, hits = kb.jobs.search_words(QUERIES[0], spec, errors=errors)
    assert found == hits_dict(release, hits) | {"release": str(fixture_wheel)}
    assert found["results"][0]["url"].startswith(f"/{release}/errors/")


def _lunr_query(index: Any, text: str) -> Any:
    from lunr.query import Query

    from kb.search.words import clauses

    q = index.create_query()
    for c in clauses(text):
        if c.prefix:
            q.term(c.term, boost=c.boost, use_pipeline=False, wildcard=Query.WILDCARD_TRAILING)
        else:
            q.term(c.term, boost=c.boost)
    return q


def ranked_as_lunr(whole: Any, texts: list[str], index: Any = None, rows: Any = None) -> None:
    """kb/search/rank.py over `index` (lunr's `whole` one by default), by field vectors or by
    `rows`, gives every document lunr's own query over `whole` gives, with the same score (the same
    float) and the same terms."""
    from kb.search.rank import plain, ranked

    vectors: dict[str, Any] = {}
    for text in texts:
        query = _lunr_query(index or whole, text)
        if not query.clauses:
            continue
        assert plain(query)
        mine = {ref: (score, held) for ref, score, held in ranked(index or whole, query, vectors, rows)}
        lunrs = {m["ref"]: (m["score"], frozenset(m["match_data"].metadata))
                 for m in whole.query(_lunr_query(whole, text))}
        assert mine == lunrs, text


def test_the_ranking_is_lunrs(wheel_args: list[str]) -> None:
    from lunr.index import Index

    from kb.jobs import search_index_for, searcher_for
    from kb.search.query import read_search_index

    spec, errors = SourceSpec(wheel=wheel_args[1]), Path(wheel_args[3])
    data = read_search_index(search_index_for(spec, errors))
    whole = Index.load(data["index"])
    terms = [t for t, _ in data["index"]["invertedIndex"]]
    texts = [*terms, *(t[:4] for t in terms), " ".join(terms), *PASTES, *QUERIES, "tp kv oom"]
    ranked_as_lunr(whole, texts)  # by the field vectors
    searcher_for(spec, errors=errors)
    stored = searcher_for(spec, errors=errors).words
    assert stored.rows is not None
    ranked_as_lunr(whole, texts, stored.index, stored.rows)  # by the answer store's rows
