"""Integration tests on real vLLM release wheels from the package index (downloaded once
through kb's own download code into the user cache, then reused)."""

from __future__ import annotations

import io
import tokenize

import pytest

from kb import PINNED_VLLM
from kb.jobs import scan_release
from kb.paths import cache_dir
from kb.records.merge import attach_set_by
from kb.scan.source import SourceSpec, download_wheel, from_wheel

pytestmark = pytest.mark.release

DCP_ID = "d97d5d8528e2b364"
DCP_TEMPLATE = ("The model's number of query heads per KV head ({num_q_per_kv}) must be divisible by "
                "`--decode-context-parallel-size` ({decode_context_parallel_size}) for GQA/MQA.")


@pytest.fixture(scope="module")
def scan_0_33():
    return scan_release(SourceSpec(vllm_version="0.33.0"))


def _token_pairs(item: tuple[str, bytes]) -> list[tuple[str, int]]:
    path, data = item
    toks = [t for t in tokenize.tokenize(io.BytesIO(data).readline)
            if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT)]
    return [(path, a.start[0]) for a, b in zip(toks, toks[1:])
            if (a.type, a.string, b.type, b.string) == (tokenize.NAME, "raise", tokenize.NAME, "ValueError")]


def raise_valueerror_tokens(version: str) -> set[tuple[str, int]]:
    """What grep finds, minus comments and strings: `raise ValueError` as tokens (files
    tokenized in parallel: Python's tokenizer is the slow part)."""
    from concurrent.futures import ProcessPoolExecutor

    with from_wheel(download_wheel(version, cache_dir()), include_vendored=False) as tree:
        # no such token pair can be in a file without both words
        files = [(path, data) for path, data in tree.items() if b"raise" in data and b"ValueError" in data]
    with ProcessPoolExecutor() as pool:
        return {pair for pairs in pool.map(_token_pairs, files, chunksize=32) for pair in pairs}


def test_every_raise_valueerror_is_found(scan_0_33) -> None:
    grep = raise_valueerror_tokens("0.33.0")
    ours = {(s.file, s.line) for s in scan_0_33.sites if s.fact.exception == "ValueError"}
    assert len(grep) > 4000
    assert ours == grep


def test_subclasses_of_valueerror_are_found(scan_0_33) -> None:
    classes = {s.exception_class for s in scan_0_33.sites}
    assert {"StructuredDecisionError", "MediaDownloadSizeExceededError"} <= classes
    # Not ValueErrors since 0.27, but exception classes of vLLM's tree: in the default set.
    assert {"VLLMValidationError", "ChatTemplateResolutionError", "RuntimeError", "NotImplementedError"} <= classes


def test_quality_figures(scan_0_33) -> None:
    c = scan_0_33.counts
    assert c["parse_warnings"] == 0
    assert c["unresolved_templates"] <= 0.01 * c["sites"]
    assert c["excluded_files"] > 0
    assert scan_0_33.tree.release == "0.33.0" and scan_0_33.tree.commit == "4ba787ec9"  # vllm/_version.py: g4ba787ec9
    assert scan_0_33.tree.ref == "v0.33.0"


def test_dcp_site_0_33(scan_0_33) -> None:
    (site,) = [s for s in scan_0_33.sites if s.id == DCP_ID]
    assert (site.file, site.line, site.fact.qualname, site.template) == (
        "vllm/config/model.py", 1602, "ModelConfig.verify_with_parallel_config", DCP_TEMPLATE)
    assert "num_q_per_kv % decode_context_parallel_size != 0" in site.fact.guard
    assert site.fact.guard_terms[0] == "decode_context_parallel_size > 1 and not self.use_mla"
    assert ("num_q_per_kv", "total_num_attention_heads // total_num_kv_heads") in [
        (d.name, d.source) for d in site.fact.locals]
    assert (site.excerpt.start, site.excerpt.end) == (1584, 1620)


def test_dcp_site_0_28() -> None:
    result = scan_release(SourceSpec(vllm_version="0.28.0"))
    (site,) = [s for s in result.sites if s.id == DCP_ID]
    assert (site.file, site.line, site.template) == ("vllm/config/model.py", 1410, DCP_TEMPLATE)
    assert (site.excerpt.start, site.excerpt.end) == (1392, 1428)


@pytest.fixture(scope="module")
def site_0_33(scan_0_33, tmp_path_factory):
    from kb.records.merge import build_records
    from kb.site.build import BuildOptions, build_site

    out = tmp_path_factory.mktemp("real") / "site"
    report = build_site(scan_0_33, BuildOptions(out), attach_set_by(build_records(scan_0_33), scan_0_33.config))
    return out, report


def test_real_site_pages_records_and_links(site_0_33, scan_0_33) -> None:
    import json
    from pathlib import Path

    import jsonschema

    from kb.site.linkcheck import broken_links

    site, report = site_0_33
    ids = {s.id for s in scan_0_33.sites}
    assert report.records == len(ids)
    assert {p.name for p in (site / "errors").iterdir() if len(p.name) == 16 and p.name in ids} == ids
    validator = jsonschema.Draft202012Validator(
        json.loads((Path(__file__).parent.parent / "kb/schemas/record.schema.json").read_text()))
    for ident in sorted(ids):
        data = (site / "api/errors" / ident).read_bytes()
        assert not (site / "api/errors" / f"{ident}.json").exists()  # one record, written once
        errors = list(validator.iter_errors(json.loads(data)))
        assert not errors, (ident, errors[0].message)
    assert broken_links(site) == []
    assert max(p.stat().st_size for p in site.rglob("*.html")) < 50_000


def test_real_dcp_page_has_every_reference_section(site_0_33) -> None:
    site, _ = site_0_33
    html = (site / f"errors/{DCP_ID}/index.html").read_text()
    for needle in ["vllm-project/vllm · error · ValueError", "<h2>Error message</h2>", "<h2>What it means</h2>",
                   "Thrown at <code>vllm/config/model.py:1602</code>",
                   'href="https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/model.py#L1602">View on GitHub (pinned to v0.33.0)',
                   "<h3>Trigger</h3>", "<h2>Related errors</h2>", "Data as JSON:", "Report an issue",
                   # no entries here: what it means is derived from the source, marked so (kb/derived/)
                   '<span class="badge derived">derived guidance</span>', "Derived from vLLM's source",
                   "<code>--decode-context-parallel-size</code> is greater than 1"]:
        assert needle in html, needle
    # nothing curated: those sections are left out, never a placeholder
    for gone in ("Not curated", "<h2>Defensive patterns</h2>", "<h2>Prevention</h2>", "<h3>Common situations</h3>"):
        assert gone not in html, gone
    assert html.count('<span class="r') >= 6  # uncurated here (no entries): the guard's block down to the raise


def test_shipped_entries_lint_clean_on_the_pinned_release() -> None:
    from kb.paths import data_dir
    from kb.records.lint import lint

    report = lint(scan_release(SourceSpec(vllm_version=PINNED_VLLM)), data_dir("errors"))
    assert report.problems == ()
    assert report.entries >= 40 and report.checks >= 25
    assert report.checks - len(report.manual) >= 20  # cross-validated against vLLM's own guard


def test_kb_check_on_the_reference_page_before_and_after(scan_0_33) -> None:
    from kb.checks.launch import parse_launch
    from kb.checks.predict import predict
    from kb.entries.load import load_entries
    from kb.paths import data_dir
    from kb.records.merge import merge

    records = merge(scan_0_33, load_entries(data_dir("errors")).entries).records
    config = {"num_attention_heads": 48, "num_key_value_heads": 8, "model_type": "llama"}

    def ids(dcp: int) -> list[str]:
        launch = parse_launch(["vllm", "serve", "m", "--tensor-parallel-size", "16", "--decode-context-parallel-size",
                               str(dcp)], config)
        return [p.record.id for p in predict(records, launch).predicted]

    # vLLM raises the maximum DCP check first (16 // 8 = 2 < 4): the reference page's own error is behind it
    assert ids(4) == ["66df3e6fd6142523"]
    after = ids(3)  # the reference page's "after"
    # still fails, with the sibling vLLM checks first: tp_size=16 must be divisible by dcp_size=3
    assert after == ["8ce9b4cdaf700441"]
    assert ids(2) == []


def test_history_over_the_published_releases() -> None:
    from kb.jobs import release_specs, scan_releases
    from kb.releases.history import build_history
    from kb.releases.published import published_releases

    scans = scan_releases(release_specs(releases="all"))
    assert [name for name, _ in scans] == published_releases()
    history = build_history(scans)
    lines = [(a.release, a.lines) for a in history.appearances[DCP_ID]]
    assert lines == [("0.27.1", (1358,)), ("0.28.0", (1410,)), ("0.29.0", (1456,)), ("0.30.0", (1469,)),
                     ("0.31.0", (1547,)), ("0.32.0", (1589,)), ("0.33.0", (1602,)), ("0.34.0", (1622,))]
    assert all(d.counts()["added"] > 0 for d in history.diffs)
    # The wordings that ship with kb are exactly what the real wheels give (`kb wordings` rewrites them).
    from kb.releases.wording import SHIPPED, dumps, wordings

    assert SHIPPED.read_bytes() == dumps(wordings(scans, history), published_releases()), \
        "kb/releases/wordings.json.gz is stale: run `kb wordings`"


def test_the_pinned_lookup_knows_older_wording() -> None:
    """On a fresh machine `kb explain` (the pinned release, shipped wordings) finds a 0.6-era
    paste, with the releases that raised it and the current error closest to it."""
    from kb.explain.match import Matcher, explain, load_index
    from kb.jobs import match_index_for
    from kb.releases.published import published_releases

    paste = ("The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV "
             "cache (20016). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing "
             "the engine.")
    (found,) = explain(paste, Matcher(load_index(match_index_for(SourceSpec(vllm_version=PINNED_VLLM))))).found
    e = found.best.entry
    order = published_releases()
    assert e["older"] and e["current"] is None and order.index(e["releases"][0]) <= order.index("0.6.6.post1")
    assert order.index(e["endedIn"]) > order.index(e["releases"][1])
    assert dict(found.best.values) == {"max_model_len": "32768", "max_seq_len": "20016"}
    # "To serve at least one request ..." as the pinned release words it (0.33.0: eba7431588b95564), the
    # V1 engine's check of the removed V0 one: its curated entry says so (`supersedes:`), and it leads
    assert found.closest is not None and found.closest.id == "ec83d3e000d5eb4e"
    assert found.answer is not None and (found.answer.id, found.answer.via) == ("ec83d3e000d5eb4e", "declared")


@pytest.mark.parametrize("paste", [
    "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
    "the engine.",
    # tests/data/real_pastes.yaml, vllm-project/vllm#10439: a 0.6 V0 traceback names the removed file
    'vllm-1  | ERROR 11-18 18:07:28 engine.py:366]   File "/usr/local/lib/python3.12/dist-packages/vllm/worker/'
    'worker.py", line 493, in raise_if_cache_size_invalid\n'
    "vllm-1  | ERROR 11-18 18:07:28 engine.py:366] ValueError: No available memory for the cache blocks. Try "
    "increasing `gpu_memory_utilization` when initializing the engine.\n",
])
def test_the_classic_oom_paste_leads_with_the_live_curated_page(paste: str, capsys: pytest.CaptureFixture[str]) -> None:
    """On a fresh machine (the pinned release, shipped wordings) the OOM message of the V0 worker,
    removed in 0.11.2, leads with the page of the error 0.34.0 raises for it (the curated successor of
    6c46f7812bf8b50d), its meaning and first fix, the user's release range beside it: the CLI's first
    error, the JSON's first answer."""
    import json

    from kb.cli import main

    live = "6b881f0598675963"
    assert main(["explain", "--vllm-version", PINNED_VLLM, paste]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[2].startswith(f"{live}  ValueError  vllm/v1/core/kv_cache_planning.py:")
    assert "Your wording is vLLM 0.4.3–0.10.2's (vllm/worker/worker.py:660, removed in 0.11.2)" in out
    assert "First fix: " in out and f"/errors/{live}/" in out and "Raised up to" not in out
    assert main(["explain", "--vllm-version", PINNED_VLLM, "--json", paste]) == 0
    (found,) = json.loads(capsys.readouterr().out)["found"]
    assert found["answer"]["id"] == live and found["answer"]["curated"] and found["answer"]["solution"]
    assert found["match"]["url"] == f"/{PINNED_VLLM}/errors/{live}/" and found["match"]["releases"] == ["0.4.3", "0.10.2"]


def test_filled_templates_of_the_release_map_back() -> None:
    from kb.explain.match import Matcher, load_index, round_trip
    from kb.jobs import match_index_for

    rt = round_trip(Matcher(load_index(match_index_for(SourceSpec(vllm_version="0.33.0")))))
    assert rt["other"] == 0 and rt["none"] == 0
    # Raises without literal text (`raise NotImplementedError`, `{str(e)}`) have nothing to match.
    assert rt["templates"] - rt["usable"] < 0.05 * rt["templates"]
    assert (rt["own"] + rt["same_text"]) / rt["usable"] >= 0.995


def test_real_pastes_score() -> None:
    """The labelled real pastes of tests/data/real_pastes.yaml (labels from the source of the
    release each user ran). Thresholds are today's measured figures, so that any regression
    fails; the targets are higher (90% right first, 0 wrong). Figures: `python bench/pastes.py`."""
    import sys
    from pathlib import Path

    import yaml

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    from pastes import DATA, score

    scores, _, unlabelled = score(yaml.safe_load(DATA.read_text(encoding="utf-8")))
    told, pinned = scores["user release"], scores[f"pinned {PINNED_VLLM}"]
    vllm = sum(v for k, v in told.items() if not k.startswith("none:"))
    assert vllm >= 75 and unlabelled == 0
    assert told["none: WRONG (matched)"] == 0 and told["none: unmatched"] >= 15  # other errors stay unmatched
    assert told["right first"] >= 0.97 * vllm and told["wrong"] == 0  # told the user's release
    assert pinned["right first"] >= 0.98 * vllm and pinned["wrong"] == 0  # the pinned release, shipped wordings


def test_held_out_real_pastes_score() -> None:
    """tests/data/real_pastes_heldout.yaml, collected after the matcher was tuned on the first set.
    One pinned answer counts as wrong: xorbitsai/inference#1715 pastes the 0.4.3 wording, which kb
    names, while its label is the 0.5.5 site whose message is built from a variable (`{msg} To allow
    overriding ...`)."""
    import sys
    from pathlib import Path

    import yaml

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    from pastes import DATA, score

    held_out = DATA.with_name("real_pastes_heldout.yaml")
    scores, _, unlabelled = score(yaml.safe_load(held_out.read_text(encoding="utf-8")))
    told, pinned = scores["user release"], scores[f"pinned {PINNED_VLLM}"]
    vllm = sum(v for k, v in told.items() if not k.startswith("none:"))
    assert vllm >= 40 and unlabelled == 0
    assert told["none: WRONG (matched)"] == 0 and told["none: unmatched"] >= 9
    assert told["right first"] >= 0.92 * vllm and told["wrong"] == 0
    assert pinned["right first"] >= 0.92 * vllm and pinned["wrong"] <= 1


def test_first_answers_of_real_pastes_help() -> None:
    """Issue #31: the share of matched real pastes whose first answer (`kb explain --json` on a fresh
    machine, the pinned release) is a live page with a fix for the paste's own error, judged from the
    sources (bench/first_answer.py). Thresholds are today's measured figures, so that a regression
    fails; the issue's target is 90% on the held-out set."""
    import sys
    from pathlib import Path

    import yaml

    from kb.explain.match import Matcher, load_index
    from kb.jobs import match_index_for

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    from first_answer import SETS, Truth, first_answers

    truth = Truth()
    matcher = Matcher(load_index(match_index_for(SourceSpec(vllm_version=PINNED_VLLM))))
    share = {}
    for path in SETS:
        c = first_answers(yaml.safe_load(path.read_text(encoding="utf-8")), truth, matcher)
        assert c["first answer: live with a fix, another error"] == 0, path.name
        share[path.name] = (c["HELPS (the same error, by the source)"] + c["HELPS (its declared successor)"]) / c["matched"]
    # measured: 74 of 78 and 38 of 41; the misses are errors vLLM removed with no successor
    assert share["real_pastes.yaml"] >= 0.94 and share["real_pastes_heldout.yaml"] >= 0.92, share
