"""The curated entries shipped in errors/: well-formed, cited and distinct."""

from __future__ import annotations

import re

from kb.entries.load import load_entries
from kb.paths import data_dir

GITHUB = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/[0-9]+$")


def test_shipped_entries_load_without_problems() -> None:
    loaded = load_entries(data_dir("errors"))
    assert loaded.problems == ()
    assert len(loaded.entries) >= 40


def test_references_are_github_issue_or_pr_urls_and_meanings_are_distinct() -> None:
    entries = load_entries(data_dir("errors")).entries
    for e in entries:
        for url in e.references + tuple(r for c in e.common_situations for r in c.references):
            assert GITHUB.match(url), (e.path, url)
    meanings = [" ".join(e.meaning.split()) for e in entries]
    assert len(set(meanings)) == len(meanings)
    assert all(len(m) >= 200 for m in meanings), [e.path for e, m in zip(entries, meanings) if len(m) < 200]


def test_every_entry_has_a_check_or_says_why_not() -> None:
    for e in load_entries(data_dir("errors")).entries:
        assert (e.check is None) != (e.no_check is None), e.path
        if e.check is not None and e.check.source_check == "manual":
            assert e.check.source_reason, e.path


def test_shipped_families_explain_the_dcp_and_input_size_errors_once() -> None:
    loaded = load_entries(data_dir("errors"))
    families = {f.slug: f for f in loaded.families}
    assert set(families) >= {"decode-context-parallel-size", "input-size-not-aligned"}
    assert len(families["decode-context-parallel-size"].members) == 5
    assert len(families["input-size-not-aligned"].members) == 3
    by_id = {e.id: e for e in loaded.entries}
    for f in families.values():
        assert all(by_id[m].family == f for m in f.members), f.path
        shared = " ".join(f.explanation.split())[:120]
        assert not any(shared in " ".join(by_id[m].meaning.split()) for m in f.members), f.path  # not restated
