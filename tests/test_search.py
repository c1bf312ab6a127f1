"""The ranked word search: the words of documents and queries, the index the build writes,
`kb search`, and its ranking (the browser's is compared in test_browser.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kb.cli import main
from kb.search.index import FIELDS, document, search_index
from kb.search.query import SearchIndex, coordination, load_search_index
from kb.search.words import SYNONYMS, Clause, clauses, document_text, terms
from sitehelpers import build_fixture, index_json


def test_words_are_runs_of_letters_and_digits_in_every_spelling() -> None:
    assert terms("--max-lora-rank") == terms("max_lora_rank") == terms("Max LoRA rank") == ["max", "lora", "rank"]
    assert terms("ValueError: bf16 on 8.0") == ["valueerror", "bf16", "on", "8", "0"]
    assert terms("ＴＰ ﬁle") == ["tp", "file"]  # full-width letters and ligatures fold (NFKC)
    assert document_text("a_b", "C-d") == "a b c d"


def test_a_query_is_its_words_their_shorthand_and_long_words_as_prefixes() -> None:
    got = clauses("tp quant")
    assert Clause("tp", 1.0, words=(0,)) in got and Clause("tensor", 1.0, words=(0,)) in got
    assert Clause("parallel", 1.0, words=(0,)) in got
    assert Clause("quant", 0.1, prefix=True, words=(1,)) in got and Clause("quantization", 1.0, words=(1,)) in got
    assert not any(c.prefix and c.term == "tp" for c in got)  # too short to be a prefix
    # each term once, at its highest weight, with every word it stands for: "kv" stands for
    # "kv cache", typed "cache" weighs 1
    kv = clauses("kv cache")
    assert [(c.term, c.words) for c in kv if not c.prefix] == [("kv", (0,)), ("cache", (0, 1))]
    assert [c.words for c in clauses("tp tp heads") if not c.prefix][-1] == (1,)  # a repeated word is one word
    assert clauses("") == [] and clauses("!!! ...") == []
    assert all(k == terms(k)[0] for k in SYNONYMS)  # keys are single words as terms() gives them


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out, _ = build_fixture(tmp_path_factory.mktemp("search"))
    return out


def test_the_build_writes_the_index_of_every_current_error(site: Path) -> None:
    data = index_json(site, "search-index")
    ids = {e["id"] for e in json.loads((site / "api" / "errors" / "index.json").read_text())["errors"]
           if e["removedSince"] is None}
    assert {d[0] for d in data["docs"]} == ids and data["synonyms"]["tp"] == ["tensor", "parallel"]
    assert [f["fieldName"] if isinstance(f, dict) else f for f in data["index"]["fields"]] == [n for n, _ in FIELDS]
    index = load_search_index(site / "api" / "search-index.json.gz")
    assert len(index.titles) == len(ids)


def test_words_rank_the_error_whose_message_holds_them_first(site: Path) -> None:
    index = load_search_index(site / "api" / "search-index.json.gz")
    hits = index.words("query heads per kv head decode context", 5)
    assert hits and hits[0].id == "d97d5d8528e2b364"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # shorthand: "dcp" is the decode context parallel size of that message
    assert index.words("dcp heads", 3)[0].id == "d97d5d8528e2b364"
    assert index.words("zzzz qqqq", 5) == []


def test_search_cli_json_and_the_paste_goes_to_the_exact_lookup_first(site: Path, capsys) -> None:
    paste = ("ValueError: The model's number of query heads per KV head (6) must be divisible by "
             "`--decode-context-parallel-size` (4) for GQA/MQA.")
    assert main(["search", "--site", str(site), "--json", "--limit", "3", paste]) == 0
    out = json.loads(capsys.readouterr().out)
    first = out["results"][0]
    assert first["id"] == "d97d5d8528e2b364" and first["kind"] == "exact"
    assert first["url"] == "/0.1.0/errors/d97d5d8528e2b364/" and set(first) == {"id", "score", "title", "url", "kind"}
    assert len(out["results"]) <= 3 and len({r["id"] for r in out["results"]}) == len(out["results"])
    assert main(["search", "--site", str(site), "--json", "kv", "heads", "divisible"]) == 0
    words = json.loads(capsys.readouterr().out)["results"]
    assert words and all(r["kind"] == "words" for r in words)
    assert main(["search", "--site", str(site), "zzzz"]) == 1
    assert "no error matches" in capsys.readouterr().out


def test_search_cli_refuses_bad_limits_and_damaged_indexes(site: Path, tmp_path: Path, capsys) -> None:
    assert main(["search", "--site", str(site), "--limit", "0", "x"]) == 2
    assert "--limit" in capsys.readouterr().err
    bad = tmp_path / "bad"
    (bad / "api").mkdir(parents=True)
    (bad / "api" / "search-index.json.gz").write_text('{"format": "kb-search/1", "docs": {}, "index": {}}')
    assert main(["search", "--site", str(bad), "x"]) != 0
    err = capsys.readouterr().err
    assert "search-index.json" in err and "Traceback" not in err


def test_documents_weigh_names_that_set_the_error(site: Path) -> None:
    from kb.records.merge import build_records
    from sitehelpers import fixture_scan

    records = build_records(fixture_scan(site.parent / "tree2"))
    doc = document(records[0], "0")
    assert set(doc) == {"ref", *(n for n, _ in FIELDS)}
    data = search_index(records, "0.1.0")
    assert SearchIndex(data).titles == {r.id: r.title for r in records if r.removed_since is None}
    # deterministic: the same records give the same bytes
    assert json.dumps(search_index(records, "0.1.0"), sort_keys=True) == json.dumps(data, sort_keys=True)


def test_coordination_is_the_squared_share_of_the_query_words_a_document_holds() -> None:
    forms = [(Clause("unsupported", 1.0, words=(0,)), ["unsupport"]),
             (Clause("unsupported", 0.1, prefix=True, words=(0,)), ["unsupported"]),
             (Clause("lora", 1.0, words=(1,)), ["lora"]), (Clause("weight", 1.0, words=(2,)), ["weight"]),
             (Clause("cache", 1.0, words=(1, 2)), ["cach"])]
    assert coordination(["lora"], forms, 3) == 1 / 9
    assert coordination(["unsupport", "lora", "weight"], forms, 3) == 1.0
    assert coordination(["unsupportedness"], forms, 3) == 1 / 9  # through the prefix
    assert coordination(["cach"], forms, 3) == 4 / 9  # a shorthand's word counts for each word it stands for
    assert coordination(["other"], forms, 3) == 0.0


def test_an_older_wording_of_a_removed_error_gives_way_to_an_equal_one_with_a_page() -> None:
    from kb.explain.match import Found, Match
    from kb.search.query import _with_page

    removed = Match({"id": "a" * 16, "older": True, "page": None, "current": None}, "exact", 40.0)
    still = Match({"id": "b" * 16, "older": True, "page": "c" * 16, "current": "c" * 16}, "exact", 40.0)
    weaker = Match({"id": "d" * 16}, "exact", 20.0)
    assert _with_page(Found(1, "m", removed, (weaker, still))) == (still, "c" * 16)
    assert _with_page(Found(1, "m", removed, (weaker,))) == (removed, "")  # no equal one: no page
    assert _with_page(Found(1, "m", weaker, (still,))) == (weaker, "d" * 16)


def _records(tmp_path: Path):
    from kb.records.merge import build_records
    from sitehelpers import fixture_scan

    return build_records(fixture_scan(tmp_path / "tree"))


def test_the_word_index_in_pieces_holds_every_term_once_with_its_weights(site: Path, monkeypatch,
                                                                         tmp_path: Path) -> None:
    """The site's search box reads the index in pieces (kb/search/shards.py): a head and buckets of
    consecutive terms, each term with its postings and its weight in each document's field vector."""
    import gzip

    import kb.search.shards
    from kb.search.shards import WORDS_HEAD, word_shards

    data = index_json(site, "search-index")
    monkeypatch.setattr(kb.search.shards, "BUCKET_CHARS", 40)
    records = _records(tmp_path)
    files = dict(word_shards(data, records))
    assert files == dict(word_shards(data, records))  # deterministic
    head = json.loads(gzip.decompress(files[WORDS_HEAD]))
    assert head["docs"] == [d[0] for d in data["docs"]] and head["fields"] == data["index"]["fields"]
    assert head["settings"] == data["settings"] and head["pipeline"] == ["stemmer"] and len(head["buckets"]) > 10
    firsts = [b[0] for b in head["buckets"]]
    assert firsts[0] == "" and firsts == sorted(firsts)
    rows = [row for _, name in head["buckets"] for row in json.loads(gzip.decompress(files["api/" + name]))["terms"]]
    assert [r[0] for r in rows] == [t for t, _ in data["index"]["invertedIndex"]]  # each term once, in order
    vectors = {ref: dict(zip(v[0::2], v[1::2])) for ref, v in data["index"]["fieldVectors"]}
    postings = dict(data["index"]["invertedIndex"])
    for term, n, *by_field in rows:
        assert n == postings[term]["_index"]
        for field, flat in zip(head["fields"], by_field):
            assert flat[0::2] == sorted(int(d) for d in postings[term][field])
            assert flat[1::2] == [vectors[f"{field}/{d}"][n] for d in flat[0::2]]
    titles = json.loads(gzip.decompress(files["api/" + head["titles"]]))["titles"]
    assert titles == [d[1] for d in data["docs"]]
    assert (site / WORDS_HEAD).is_file() and all(name.startswith("api/search-words") for name in files)


def test_the_word_index_says_what_a_result_shows_as_the_match_index_does(site: Path) -> None:
    """The search box lists ranked words before the match index is in (six times the bytes): the
    word index's pieces carry what a result's line shows of each error (title, class, file, line,
    curated), the same as the match index's entry that replaces it once the lookup has answered."""
    import gzip

    from kb.search.shards import WORDS_HEAD

    head = json.loads(gzip.decompress((site / WORDS_HEAD).read_bytes()))
    piece = json.loads(gzip.decompress((site / "api" / head["titles"]).read_bytes()))
    live = {}
    for e in index_json(site, "match-index")["entries"]:
        if not e.get("older") and not e.get("part"):
            live.setdefault(e["id"], e)
    shown = [{"title": t, "cls": w[0], "file": piece["files"][w[1]], "line": w[2], "curated": w[3] == 1}
             for t, w in zip(piece["titles"], piece["where"], strict=True)]
    assert shown == [{k: live[i][k] for k in ("title", "cls", "file", "line", "curated")} for i in head["docs"]]
    assert piece["files"] == sorted(set(piece["files"])) and len(piece["files"]) < len(shown)
