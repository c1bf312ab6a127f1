from __future__ import annotations

from pathlib import Path

import pytest

from entryhelpers import (
    DCP_ENTRY,
    DCP_ID,
    DCP_MAX,
    DCP_MAX_ENTRY,
    DCP_MAX_FILE,
    DCP_MAX_ID,
    FAMILY_EXPLANATION,
    family_yaml,
    write_entries,
    write_family,
)
from kb.entries.load import Loaded, load_entries
from kb.records.merge import merge
from sitehelpers import fixture_scan

GOOD = f'''
id: {DCP_ID}
meaning: A meaning long enough for a test entry, written in plain markdown with `code`.
'''


def problems(tmp_path: Path, text: str, name: str = "bad.yaml") -> list[str]:
    folder = write_entries(tmp_path / "errors", {name: text})
    return [str(p) for p in load_entries(folder).problems]


@pytest.mark.parametrize("text, expected", [
    (GOOD + "colour: red\n", ["errors/bad.yaml:3: unknown key 'colour'"]),
    (GOOD + "solutions: just one string\n", ["errors/bad.yaml:3: solutions must be a list (got a string)"]),
    ("id: d97d5d8528e2b364\nsolutions: [a]\n", ["errors/bad.yaml:1: missing field 'meaning'"]),
    (GOOD.replace(DCP_ID, "XYZ"), ["errors/bad.yaml:1: id must be 16 lowercase hex characters (got 'XYZ')"]),
    (GOOD + "references: [https://example.com/x]\n",
     ["errors/bad.yaml:3: references.0 must be a GitHub issue or PR URL (https://github.com/OWNER/REPO/issues/N or "
      "/pull/N), got 'https://example.com/x'"]),
    (GOOD + "prevention:\n  - ok\n  - 'Do not <script>alert(1)</script>'\n",
     ["errors/bad.yaml:5: raw HTML in markdown (prevention.1): <script> (use backticks or plain text)",
      "errors/bad.yaml:5: raw HTML in markdown (prevention.1): </script> (use backticks or plain text)"]),
    (GOOD + "trigger: 'TODO: write it'\n", ["errors/bad.yaml:3: unfinished: TODO left in trigger"]),
    (GOOD + "example_fix: {language: rust, before: a, after: b}\n",
     ["errors/bad.yaml:3: example_fix.language must be one of shell, python (got 'rust')"]),
    ("id: [1\n", ["errors/bad.yaml:2: not valid YAML: expected ',' or ']', but got '<stream end>'"]),
    (GOOD + "id: d97d5d8528e2b364\n", ["errors/bad.yaml:3: duplicate key 'id'"]),
    (GOOD + "check:\n  inputs: [tensor_parallel_size]\n  raises_when: \"__import__('os')\"\n"
            "  cases: [{inputs: {}, raises: true}, {inputs: {}, raises: false}]\n",
     ["errors/bad.yaml:5: raises_when: only calls of abs, bool, float, int, len, max, min, str are allowed: "
      "__import__('os')"]),
    (GOOD + "check:\n  inputs: [tensor_parallel_size, colour_depth]\n  raises_when: tensor_parallel_size > 1\n"
            "  cases: [{inputs: {tensor_parallel_size: 2}, raises: true}, {inputs: {tensor_parallel_size: 3}, raises: true}]\n",
     ["errors/bad.yaml:4: unknown input 'colour_depth': not in the vocabulary (kb/vocab.py)",
      "errors/bad.yaml:6: cases need at least one that raises and one that does not"]),
    (GOOD + "common_situations:\n  - text: seen\n    references: [https://github.com/vllm-project/vllm/issues/1]\n",
     ["errors/bad.yaml:5: https://github.com/vllm-project/vllm/issues/1 is cited by a situation but missing from "
      "references"]),
])
def test_every_loader_problem_is_located(tmp_path: Path, text: str, expected: list[str]) -> None:
    assert problems(tmp_path, text) == expected


def test_duplicate_ids_across_files(tmp_path: Path) -> None:
    folder = write_entries(tmp_path / "errors", {"a.yaml": GOOD, "b.yaml": GOOD})
    loaded = load_entries(folder)
    assert [str(p) for p in loaded.problems] == [f"errors/b.yaml:1: duplicate id {DCP_ID}: also in errors/a.yaml"]
    assert [e.path for e in loaded.entries] == ["errors/a.yaml"]


def test_good_entries_load_with_their_structure(tmp_path: Path) -> None:
    folder = write_entries(tmp_path / "errors", {"dcp.yaml": DCP_ENTRY, "max.yaml": DCP_MAX_ENTRY})
    loaded = load_entries(folder)
    assert loaded.problems == ()
    dcp = next(e for e in loaded.entries if e.id == DCP_ID)
    assert dcp.check is not None and dcp.check.inputs[0] == "num_attention_heads"
    assert dcp.example_fix is not None and dcp.example_fix.model_config == {"num_attention_heads": 48,
                                                                            "num_key_value_heads": 8}
    assert dcp.line_of("check", "cases", 1) == 24


def test_merge_orphans_staleness_and_related(tmp_path: Path) -> None:
    scan = fixture_scan(tmp_path / "tree", {DCP_MAX_FILE: DCP_MAX})
    orphan = DCP_ENTRY.replace(DCP_ID, "0123456789abcdef").replace("query heads per KV head", "query heads per KV group")
    # the guard it was verified against differs, and so does its check: it stays stale
    stale = (DCP_MAX_ENTRY.replace("decode_context_parallel_size > max_dcp_size\"", "decode_context_parallel_size >= max_dcp_size\"")
             .replace("decode_context_parallel_size > tensor_parallel_size //", "decode_context_parallel_size >= tensor_parallel_size //"))
    related = GOOD.replace(DCP_ID, "f644a7c8e4fdc46c") + "related: [ffffffffffffffff]\n"
    folder = write_entries(tmp_path / "errors", {"orphan.yaml": orphan, "stale.yaml": stale, "rel.yaml": related})
    merged = merge(scan, load_entries(folder).entries)
    got = [str(p) for p in merged.problems]
    assert got[0] == ("errors/orphan.yaml:1: orphan: id 0123456789abcdef is not raised in 0.1.0; nearest scanned "
                      f"template in vllm/config/model.py: {DCP_ID} {next(x.template for x in scan.sites if x.id == DCP_ID)!r}")
    assert got[1] == "errors/rel.yaml:3: related id ffffffffffffffff is not raised in 0.1.0"
    assert got[2].startswith("errors/stale.yaml:24: stale: guard changed since 0.1.0: verified against")
    record = next(r for r in merged.records if r.id == DCP_MAX_ID)
    assert record.curated and record.stale and "guard changed" in record.stale[0]
    assert not any(r.curated for r in merged.records if r.id == DCP_ID)  # the orphan landed nowhere


def test_a_changed_guard_that_the_check_still_agrees_with_is_carried(tmp_path: Path) -> None:
    scan = fixture_scan(tmp_path / "tree", {DCP_MAX_FILE: DCP_MAX})
    moved = DCP_MAX_ENTRY.replace("decode_context_parallel_size > max_dcp_size\"", "decode_context_parallel_size >= max_dcp_size\"")
    merged = merge(scan, load_entries(write_entries(tmp_path / "errors", {"moved.yaml": moved})).entries)
    assert [p.kind for p in merged.problems] == ["carried"]
    assert str(merged.problems[0]).startswith("errors/moved.yaml:24: carried: guard changed since 0.1.0: verified against")
    assert str(merged.problems[0]).endswith("its check agrees with the new guard: update `verified:`")
    record = next(r for r in merged.records if r.id == DCP_MAX_ID)
    assert record.curated and record.checked and not record.stale


def test_message_change_makes_an_entry_stale(tmp_path: Path) -> None:
    scan = fixture_scan(tmp_path / "tree", {DCP_MAX_FILE: DCP_MAX})
    folder = write_entries(tmp_path / "errors", {"dcp.yaml": DCP_ENTRY.replace("for GQA/MQA.", "for GQA.")})
    merged = merge(scan, load_entries(folder).entries)
    assert [p.kind for p in merged.problems] == ["stale"]
    assert str(merged.problems[0]).startswith("errors/dcp.yaml:3: stale: message changed in 0.1.0")


# --- families: errors/families/<slug>.yaml ------------------------------------------------------
def family_problems(tmp_path: Path, families: dict[str, str]) -> tuple[list[str], Loaded]:
    folder = write_entries(tmp_path / "errors", {"dcp.yaml": DCP_ENTRY, "max.yaml": DCP_MAX_ENTRY})
    for name, text in families.items():
        write_family(folder, name, text)
    loaded = load_entries(folder)
    return [str(p) for p in loaded.problems], loaded


def test_a_family_reaches_each_member(tmp_path: Path) -> None:
    got, loaded = family_problems(tmp_path, {"dcp.yaml": family_yaml([DCP_MAX_ID, DCP_ID])})
    assert got == []
    (family,) = loaded.families
    assert (family.slug, family.path, family.members) == ("dcp", "errors/families/dcp.yaml", (DCP_MAX_ID, DCP_ID))
    assert all(e.family == family for e in loaded.entries)


def test_an_unknown_member_is_located_and_the_family_left_out(tmp_path: Path) -> None:
    got, loaded = family_problems(tmp_path, {"dcp.yaml": family_yaml([DCP_ID, "0123456789abcdef"])})
    assert got == ["errors/families/dcp.yaml:6: unknown member 0123456789abcdef: no entry in errors/ has this id"]
    assert loaded.families == () and all(e.family is None for e in loaded.entries)


def test_a_member_in_two_families_is_located(tmp_path: Path) -> None:
    got, loaded = family_problems(tmp_path, {"a.yaml": family_yaml([DCP_ID, DCP_MAX_ID]),
                                             "b.yaml": family_yaml([DCP_MAX_ID, DCP_ID], title="Again")})
    assert got == [f"errors/families/b.yaml:5: member {DCP_MAX_ID} (errors/max.yaml) is also in errors/families/a.yaml: "
                   "an entry is in at most one family",
                   f"errors/families/b.yaml:6: member {DCP_ID} (errors/dcp.yaml) is also in errors/families/a.yaml: "
                   "an entry is in at most one family"]
    assert [f.slug for f in loaded.families] == ["a"]


@pytest.mark.parametrize("text, expected", [
    (f"title: DCP\nmembers: [{DCP_ID}, {DCP_MAX_ID}]\n", ["errors/families/f.yaml:1: missing field 'explanation'"]),
    (family_yaml([DCP_ID, DCP_MAX_ID]) + "colour: red\n", ["errors/families/f.yaml:7: unknown key 'colour'"]),
    (family_yaml([DCP_ID]), ["errors/families/f.yaml:4: members is empty or too short"]),
    (family_yaml([DCP_ID, "XYZ"]),
     ["errors/families/f.yaml:6: members.1 must be an entry id, 16 lowercase hex characters (got 'XYZ')"]),
    (family_yaml([DCP_ID, DCP_ID]),
     [f"errors/families/f.yaml:6: member {DCP_ID} is listed twice (members.0 and members.1)"]),
    (family_yaml([DCP_ID, DCP_MAX_ID], explanation="Too short."),
     ["errors/families/f.yaml:2: explanation is shorter than 200 characters: explain the mechanism"]),
    (family_yaml([DCP_ID, DCP_MAX_ID], explanation=FAMILY_EXPLANATION + " <b>bold</b>"),
     ["errors/families/f.yaml:2: raw HTML in markdown (explanation): <b> (use backticks or plain text)",
      "errors/families/f.yaml:2: raw HTML in markdown (explanation): </b> (use backticks or plain text)"]),
    ("title: [1\n", ["errors/families/f.yaml:2: not valid YAML: expected ',' or ']', but got '<stream end>'"]),
])
def test_every_family_problem_is_located(tmp_path: Path, text: str, expected: list[str]) -> None:
    got, loaded = family_problems(tmp_path, {"f.yaml": text})
    assert got == expected
    assert loaded.families == () and len(loaded.entries) == 2  # the members load, without the family


def test_a_family_file_name_must_be_a_slug(tmp_path: Path) -> None:
    got, _ = family_problems(tmp_path, {"Bad_Name.yaml": family_yaml([DCP_ID, DCP_MAX_ID])})
    assert got == ["errors/families/Bad_Name.yaml:1: the file name must be a slug (lowercase words joined by -), "
                   "got 'Bad_Name'"]


def test_a_changed_family_file_is_read_again(tmp_path: Path) -> None:
    folder = write_entries(tmp_path / "errors", {"dcp.yaml": DCP_ENTRY, "max.yaml": DCP_MAX_ENTRY})
    assert load_entries(folder).families == ()
    path = write_family(folder, "dcp.yaml", family_yaml([DCP_ID, DCP_MAX_ID]))
    assert [f.title for f in load_entries(folder).families] == ["DCP checks"]
    path.write_text(family_yaml([DCP_ID, DCP_MAX_ID], title="DCP size checks, renamed"), encoding="utf-8")
    assert [f.title for f in load_entries(folder).families] == ["DCP size checks, renamed"]
