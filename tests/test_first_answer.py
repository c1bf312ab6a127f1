"""The first answer is the page that helps (issue #31): a pasted message of any release leads with
the page of an error the release raises (the same message at another site, the history's
successor, or a successor a curated entry declares with `supersedes:`), with its meaning and first
fix and the user's own release range beside it; a removed error with none still gets a link that
works (the nearest live page). And `kb lint` checks every `supersedes:` id."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kb.explain.index import match_index
from kb.explain.match import Matcher, explain
from kb.explain.output import explanation_json, explanation_text
from kb.model import Entry, Record, ScanResult, Wording
from kb.records.merge import build_records
from sitehelpers import fixture_scan

OOM = "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."
SEQ = ("The model's max seq len ({max_model_len}) is larger than the maximum number of tokens that can be stored in "
       "KV cache ({max_seq_len}). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
       "initializing the engine.")
EXTRA = {
    "vllm/v1/core/kv.py": f'''
def check(available, needed, max_model_len, hint):
    if available <= 0:
        raise ValueError("{OOM}")
    if needed > available:
        raise ValueError(
            f"To serve at least one request with the model's max seq len ({{max_model_len}}), "
            f"({{needed}} GiB KV cache is needed, which is larger than the available KV cache memory "
            f"({{available}} GiB). {{hint}}"
        )
''',
    # one message raised at two live sites: only one of them has a curated page
    "vllm/tokens/a.py": '''
def check_a(max_input_id):
    raise ValueError(f"Token id {max_input_id} is out of vocabulary")
''',
    "vllm/tokens/b.py": '''
def check_b(max_input_id):
    raise ValueError(f"Token id {max_input_id} is out of vocabulary")
''',
}
OLD_OOM = "032bf9bf00000001"  # the V0 worker's wording of the OOM message, removed
OLD_SEQ = "117911a700000002"  # the V0 worker's KV cache check, removed, its successor declared
GONE = "b84eaa3700000003"  # removed, no successor
EDITED = "9db22ec200000004"  # edited into a live id, and the history's `current` left on itself (a loop)


@pytest.fixture(scope="module")
def scan(tmp_path_factory: pytest.TempPathFactory) -> ScanResult:
    return fixture_scan(tmp_path_factory.mktemp("first") / "tree", EXTRA)


def _site(scan: ScanResult, file: str, starts: str) -> str:
    (ident,) = {s.id for s in scan.sites if s.file == file and s.template.startswith(starts)}
    return ident


def _entry(r: Record, supersedes: tuple[str, ...] = ()) -> Record:
    return replace(r, entry=Entry(r.id, f"errors/{r.id}.yaml", f"What {r.id} means, in words a user knows.",
                                  solutions=(f"The first fix for {r.id}.",), supersedes=supersedes))


def _wordings(scan: ScanResult) -> tuple[Wording, ...]:
    live_token = _site(scan, "vllm/tokens/a.py", "Token id")
    return (
        Wording(OLD_OOM, OOM, "vllm/worker/worker.py", 660, "raise_if_cache_size_invalid", "ValueError", "0.4.3",
                "0.10.2", None, "0.11.2", OLD_OOM),
        Wording(OLD_SEQ, SEQ, "vllm/worker/worker.py", 665, "raise_if_cache_size_invalid", "ValueError", "0.4.3",
                "0.10.2", None, "0.11.2", OLD_SEQ),
        Wording(GONE, "Cannot request more than {max_logprobs} logprobs.", "vllm/engine/llm_engine.py", 720,
                "LLMEngine._create_sequence_group_with_sampling", "ValueError", "0.4.3", "0.10.2", None, "0.11.2",
                GONE),
        Wording(EDITED, "Token number {max_input_id} is beyond the vocabulary of the model", "vllm/tokens/old.py", 3,
                "check", "ValueError", "0.9.2", "0.11.2", EDITED, "0.12.0", EDITED, live_token),
    )


def _matcher(scan: ScanResult, curated: dict[str, tuple[str, ...]]) -> Matcher:
    """The fixture's match index, `curated`: id -> the ids its entry supersedes."""
    records = [_entry(r, curated[r.id]) if r.id in curated else r for r in build_records(scan)]
    return Matcher(match_index(records, "0.1.0", _wordings(scan)))


def test_a_removed_wording_of_a_live_message_leads_with_the_live_page(scan: ScanResult) -> None:
    """The classic OOM paste of a V0 release, its traceback naming the removed file: the first
    answer is the live error raising the same message, with its meaning and first fix, the
    user's release range beside it (CLI, JSON)."""
    live = _site(scan, "vllm/v1/core/kv.py", "No available")
    matcher = _matcher(scan, {live: ()})
    paste = ('  File "/usr/lib/python3/dist-packages/vllm/worker/worker.py", line 660, in raise_if_cache_size_invalid\n'
             f"ValueError: {OOM}\n")
    ex = explain(paste, matcher)
    (found,) = ex.found
    assert found.best.id == OLD_OOM  # the user's wording, told by the traceback
    assert found.answer is not None and (found.answer.id, found.answer.via) == (live, "same")
    text = explanation_text(ex)
    assert text.splitlines()[2].startswith(f"{live}  ValueError  vllm/v1/core/kv.py:")
    assert (f"Your wording is vLLM 0.4.3–0.10.2's (vllm/worker/worker.py:660, removed in 0.11.2); today the same "
            "message is raised at vllm/v1/core/kv.py:3.") in text
    assert f"What it means: What {live} means" in text and f"First fix: The first fix for {live}." in text
    assert f"/errors/{live}/" in text and "Raised up to" not in text
    (data,) = json.loads(explanation_json(ex))["found"]
    assert data["answer"]["id"] == live and data["answer"]["via"] == "same" and data["answer"]["curated"]
    assert data["answer"]["solution"] == f"The first fix for {live}." and data["answer"]["url"] == f"/0.1.0/errors/{live}/"
    assert data["match"]["id"] == OLD_OOM and data["match"]["url"] == f"/0.1.0/errors/{live}/"
    assert data["match"]["releases"] == ["0.4.3", "0.10.2"] and data["answer"]["note"].startswith("Your wording is")


def test_among_live_sites_of_one_message_the_one_with_a_fix_leads(scan: ScanResult) -> None:
    """Two files raise one message and only one page has a fix: that page leads, unless the
    paste's traceback names the other file."""
    a, b = _site(scan, "vllm/tokens/a.py", "Token id"), _site(scan, "vllm/tokens/b.py", "Token id")
    for curated, other in ((a, b), (b, a)):
        matcher = _matcher(scan, {curated: ()})
        (found,) = explain("ValueError: Token id 151665 is out of vocabulary", matcher).found
        assert found.answer is not None and found.answer.id == curated
        other_file = "vllm/tokens/a.py" if other == a else "vllm/tokens/b.py"
        traced = f'  File "/x/{other_file}", line 3, in check\nValueError: Token id 151665 is out of vocabulary\n'
        (found,) = explain(traced, matcher).found
        assert found.answer is not None and (found.answer.id, found.answer.via) == (other, "own")
        assert "The same message is raised at: vllm/tokens/" in explanation_text(explain(traced, matcher))


def test_a_declared_successor_answers_for_a_removed_error(scan: ScanResult) -> None:
    """`supersedes:` in the live error's entry: the removed V0 check's paste leads with the V1
    check's page, and it is the current error closest to it. Without the declaration the paste
    is said to be removed, and the nearest live page is linked, never given as the answer."""
    successor = _site(scan, "vllm/v1/core/kv.py", "To serve")
    paste = ("ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be "
             "stored in KV cache (20016). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
             "initializing the engine.")
    ex = explain(paste, _matcher(scan, {successor: (OLD_SEQ,)}))
    (found,) = ex.found
    assert found.best.id == OLD_SEQ and dict(found.best.values) == {"max_model_len": "32768", "max_seq_len": "20016"}
    assert found.answer is not None and (found.answer.id, found.answer.via) == (successor, "declared")
    assert found.closest is not None and found.closest.id == successor
    text = explanation_text(ex)
    assert text.splitlines()[2].startswith(successor) and "the successor its curated entry declares" in text
    assert f"First fix: The first fix for {successor}." in text

    ex = explain(paste, _matcher(scan, {}))
    (found,) = ex.found
    assert found.answer is None and found.closest is not None
    text = explanation_text(ex)
    assert text.splitlines()[2].startswith(OLD_SEQ)
    assert "Raised up to vLLM 0.10.2 (from 0.4.3); removed in 0.11.2." in text
    assert f"The closest current error (similarity {found.closest.score:.2f}, not this error): {found.closest.id}" in text
    (data,) = json.loads(explanation_json(ex))["found"]
    assert data["answer"] is None and data["match"]["url"] is None
    assert data["closestCurrent"]["url"] == f"/0.1.0/errors/{found.closest.id}/"


def test_a_removed_error_with_no_successor_still_links_a_live_page(scan: ScanResult) -> None:
    """However few words it shares with any live error, the nearest one is linked (the site shows
    the same), said to be the closest, not the error."""
    ex = explain("ValueError: Cannot request more than 20 logprobs.", _matcher(scan, {}))
    (found,) = ex.found
    assert found.best.id == GONE and found.answer is None
    assert found.closest is not None and found.closest.score < 0.2  # below what a suggestion needs
    assert not found.closest.entry.get("older")
    assert f"/errors/{found.closest.id}/" in explanation_text(ex)


def test_an_edit_back_to_an_earlier_wording_still_leads_to_the_live_error(scan: ScanResult) -> None:
    """0.8.5 -> 0.9.2 -> 0.12.0 edited a message back: the history's `current` loops on the middle
    wording; its `next` leads to the live id."""
    live = _site(scan, "vllm/tokens/a.py", "Token id")
    ex = explain("ValueError: Token number 99 is beyond the vocabulary of the model", _matcher(scan, {live: ()}))
    (found,) = ex.found
    assert found.best.id == EDITED and found.answer is not None and (found.answer.id, found.answer.via) == (
        live, "successor")


def test_kb_search_leads_with_the_first_answer(scan: ScanResult) -> None:
    from kb.search.query import _with_page

    live = _site(scan, "vllm/v1/core/kv.py", "No available")
    (found,) = explain(f"ValueError: {OOM}", _matcher(scan, {})).found
    assert _with_page(found)[1] == live


# --- `supersedes:` in curated entries ----------------------------------------------------------
ENTRY = """id: {id}
meaning: >-
  A meaning long enough for the loader: it says what the error is, where vLLM raises it, which
  setting the user controls and what to change, in more than two hundred characters of prose.
solutions: [Lower the setting.]
no_check: the condition reads device memory measured at startup
supersedes:
{supersedes}
"""


def test_the_loader_reads_supersedes_and_locates_bad_ids(tmp_path: Path) -> None:
    from kb.entries.load import load_entries

    errors = tmp_path / "errors"
    errors.mkdir()
    (errors / "good.yaml").write_text(ENTRY.format(id="6b881f0598675963", supersedes="  - 032bf9bf5287106e\n"))
    (errors / "bad.yaml").write_text(ENTRY.format(id="ec83d3e000d5eb4e", supersedes=(
        "  - ec83d3e000d5eb4e\n  - 117911a728ec5080\n  - 117911a728ec5080\n  - 117911A728EC5080\n")))
    loaded = load_entries(errors)
    assert [(e.id, e.supersedes) for e in loaded.entries] == [("6b881f0598675963", ("032bf9bf5287106e",))]
    assert [str(p) for p in loaded.problems] == [
        "errors/bad.yaml:11: supersedes.3 does not match '^[0-9a-f]{16}$' (got '117911A728EC5080')"]
    (errors / "bad.yaml").write_text(ENTRY.format(id="ec83d3e000d5eb4e", supersedes=(
        "  - ec83d3e000d5eb4e\n  - 117911a728ec5080\n  - 117911a728ec5080\n")))
    assert [str(p) for p in load_entries(errors).problems] == [
        "errors/bad.yaml:8: supersedes.0 is this entry's own id",
        "errors/bad.yaml:10: 117911a728ec5080 is listed twice (supersedes.1 and supersedes.2)"]


def test_lint_checks_each_superseded_id_against_the_shipped_wordings(scan: ScanResult) -> None:
    """An id no published release raised, one this release still raises, one its history follows
    to a live id, and one two entries claim: each a located problem."""
    from kb.records.lint import supersedes_problems
    from kb.releases.lineage import Lineage
    from kb.releases.wording import load

    live = _site(scan, "vllm/v1/core/kv.py", "No available")
    other = _site(scan, "vllm/v1/core/kv.py", "To serve")
    shipped = {w.id: w for w in load()[1]}
    removed = "032bf9bf5287106e"  # the V0 worker's OOM message: shipped, removed in 0.11.2
    assert shipped[removed].current is None
    followed = "2698ad316f9a7525"  # an older id of the V1 OOM message
    lin = Lineage(scan.tree.release, aliases={followed: (live, "edited", "0.22.1")}, shipped=("0.2.7", "0.34.0"))

    def entry(ident: str, path: str, *old: str) -> Entry:
        lines = {f"supersedes.{i}": 10 + i for i in range(len(old))}
        return Entry(ident, path, "meaning", supersedes=old, lines=lines)

    problems = supersedes_problems([
        entry(live, "errors/oom.yaml", removed, "0000000000000000", other, followed),
        entry(other, "errors/seq.yaml", removed),
    ], scan, lin)
    release = scan.tree.release or scan.tree.ref
    assert problems == [
        "errors/oom.yaml:11: supersedes 0000000000000000, which is no error id of any published release "
        "(kb/releases/wordings.json.gz, 0.2.7 to 0.34.0)",
        f"errors/oom.yaml:12: supersedes {other}, which vLLM {release} still raises: only a removed error can be "
        "superseded",
        f"errors/oom.yaml:13: supersedes {followed}, which vLLM {release} raises as {live} (the release history "
        "already follows it)",
        f"errors/seq.yaml:10: supersedes {removed}, which errors/oom.yaml supersedes too: one live error answers for "
        "a removed one",
    ]
