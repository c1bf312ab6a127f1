"""Curated knowledge follows its error into a newer release in a one-release build: the shipped
wordings extended one release at a time (as `kb release` does) equal those built from every
release's scan, and a build of a release newer than the shipped wordings carries entries and
reports written for older ids (kb/releases/lineage.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from fixture_tree import write_tree
from kb.model import ScanResult
from kb.releases.history import build_history, diff_scans
from kb.releases.lineage import lineage, release_key
from kb.releases.wording import extend, wordings
from kb.scan.ids import error_id
from kb.scan.scanner import scan
from kb.scan.source import from_dir

KEPT = 'def f(x):\n    if x:\n        raise ValueError(f"alpha {x}")\n'
GONE_LATER = 'def g():\n    raise ValueError("to be removed later, then raised again")\n'
EDITED = ['def k():\n    raise ValueError("the first message about things")\n',
          'def k():\n    raise ValueError("the first message about many things")\n',
          'def k():\n    raise ValueError("the first message about many more things")\n']
MOVING = 'def h(y):\n    if y:\n        raise ValueError(f"moving message that is long enough {y}")\n'
ADVICE = ['def plan(n):\n    if n <= 0:\n        raise ValueError("No available memory for the cache blocks. Try increasing '
          '`gpu_memory_utilization`. See the docs for more details.")\n',
          'def plan(n, hint):\n    if n <= 0:\n        raise ValueError(f"No available memory for the cache blocks. {hint} '
          'See the docs for more details.")\n']
TWO_SITES = 'def t(a, b):\n    if a:\n        raise ValueError("one message raised twice")\n{pad}    if b:\n' \
            '        raise ValueError("one message raised twice")\n'

RELEASES = {
    "0.1.0": {"vllm/a.py": KEPT + GONE_LATER, "vllm/b.py": MOVING, "vllm/c.py": EDITED[0], "vllm/m.py": ADVICE[0],
              "vllm/t.py": TWO_SITES.format(pad="")},
    "0.2.0": {"vllm/a.py": KEPT, "vllm/d.py": MOVING, "vllm/c.py": EDITED[1], "vllm/m.py": ADVICE[0],
              "vllm/t.py": TWO_SITES.format(pad="\n\n")},
    "0.3.0": {"vllm/a.py": "\n\n" + KEPT + GONE_LATER, "vllm/d.py": MOVING, "vllm/c.py": EDITED[2],
              "vllm/m.py": ADVICE[1], "vllm/t.py": TWO_SITES.format(pad="")},
    "0.4.0": {"vllm/a.py": KEPT, "vllm/c.py": EDITED[2], "vllm/m.py": ADVICE[1], "vllm/t.py": TWO_SITES.format(pad="")},
}
EDIT_IDS = [error_id(t, "vllm/c.py") for t in ("the first message about things", "the first message about many things",
                                               "the first message about many more things")]
ADVICE_OLD = error_id("No available memory for the cache blocks. Try increasing `gpu_memory_utilization`. See the docs "
                      "for more details.", "vllm/m.py")
ADVICE_NEW = error_id("No available memory for the cache blocks. {hint} See the docs for more details.", "vllm/m.py")
MOVED_OLD = error_id("moving message that is long enough {y}", "vllm/b.py")
MOVED_NEW = error_id("moving message that is long enough {y}", "vllm/d.py")


def _scan(root: Path, release: str, files: dict[str, str]) -> ScanResult:
    write_tree(root, {"vllm/__init__.py": "", "vllm/_version.py": f"__version__ = {release!r}\n"} | files)
    with from_dir(root, include_vendored=False) as t:
        result = scan(t, jobs=1)
    return replace(result, tree=replace(result.tree, release=release))


@pytest.fixture(scope="module")
def scans(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, ScanResult]]:
    tmp = tmp_path_factory.mktemp("lineage")
    return [(name, _scan(tmp / name, name, files)) for name, files in RELEASES.items()]


def test_extending_one_release_at_a_time_equals_the_whole_history(scans) -> None:
    """Edited twice, moved, removed and raised again, words made a placeholder, a site's line
    moved: each step of `extend` gives what `wordings()` gives for all the scans."""
    for k in range(2, len(scans) + 1):
        full = wordings(scans[:k], build_history(scans[:k]))
        before = wordings(scans[: k - 1], build_history(scans[: k - 1]))
        diff = diff_scans(scans[k - 2][1], scans[k - 1][1], scans[k - 2][0], scans[k - 1][0])
        assert extend(before, [n for n, _ in scans[: k - 1]], diff, scans[k - 1][1]) == full, scans[k - 1][0]


def test_the_history_follows_words_made_a_placeholder(scans) -> None:
    history = build_history(scans)
    assert history.aliases[ADVICE_OLD] == (ADVICE_NEW, "edited", "0.3.0")
    (change,) = [c for c in history.diffs[1].changes if c.old == ADVICE_OLD]
    assert change.detail == "words became a placeholder"


def _shipped(scans: list[tuple[str, ScanResult]]):
    return tuple(n for n, _ in scans), wordings(scans, build_history(scans))


def test_a_release_newer_than_the_shipped_wordings_is_diffed_against_them(scans) -> None:
    """Shipped up to 0.3.0, building 0.4.0: the lineage equals what the shipped wordings up to
    0.4.0 say (except the guards, which the wordings do not keep)."""
    grown = lineage(scans[-1][1], _shipped(scans[:-1]))
    exact = lineage(scans[-1][1], _shipped(scans))
    assert grown.wordings == exact.wordings
    assert grown.aliases == exact.aliases and grown.removed == exact.removed
    assert grown.diff is not None and (grown.diff.old, grown.diff.new) == ("0.3.0", "0.4.0")
    assert exact.diff is None
    # every wording of the error leads to the id raised now
    assert {i: grown.aliases[i][0] for i in EDIT_IDS[:2]} == dict.fromkeys(EDIT_IDS[:2], EDIT_IDS[2])
    assert grown.aliases[ADVICE_OLD][0] == ADVICE_NEW
    # the moved message was removed in 0.4.0: both its ids say so, with the last release that raised it
    assert grown.removed[MOVED_OLD].last == "0.3.0" and grown.removed[MOVED_OLD].since == "0.4.0"
    assert grown.removed[MOVED_NEW] == grown.removed[MOVED_OLD]


def test_an_older_shipped_release_follows_newer_ids_back(scans) -> None:
    lin = lineage(scans[1][1], _shipped(scans))  # 0.2.0, with wordings up to 0.4.0
    assert lin.aliases[EDIT_IDS[2]][:2] == (EDIT_IDS[1], "newer")
    assert lin.aliases[EDIT_IDS[0]][0] == EDIT_IDS[1]
    assert lin.newer == {}  # every id of 0.3.0 and 0.4.0 is a wording of an error 0.2.0 raises, or its own
    assert lin.aliases[MOVED_OLD][0] == MOVED_NEW


def test_release_order() -> None:
    names = ["0.2.7", "0.6.6.post1", "0.9.2", "0.10.0", "0.34.0rc1", "0.34.0", "0.34.0.post1", "0.35.0.dev3"]
    keys = [release_key(n) for n in names]
    assert all(k is not None for k in keys)
    assert sorted(names, key=lambda n: release_key(n) or ()) == names[:-1][:4] + ["0.34.0rc1", "0.34.0", "0.34.0.post1",
                                                                                  "0.35.0.dev3"]
    assert release_key("main") is None
