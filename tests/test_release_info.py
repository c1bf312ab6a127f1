"""Release information in every build (kb/releases/known.py, kb/site/releases.py): a one-release
build lists the releases kb knows and gives the built release its page, computed from the
wordings kb ships; and provenance names a real commit, else the release tag (kb/scan/source.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import git
import jsonschema
import pytest

from conftest import make_wheel
from fixture_tree import tree_files, write_tree
from kb.model import ScanResult
from kb.records.merge import attach_set_by, build_records
from kb.releases.history import build_history
from kb.releases.known import known_releases, wording_diffs
from kb.releases.published import published_releases
from kb.releases.wording import wordings
from kb.scan.ids import error_id
from kb.scan.scanner import scan
from kb.scan.source import commit_kind, commit_of, from_dir, from_git, from_wheel
from kb.site.api import SiteInfo, api_record
from kb.site.build import BuildOptions, build_site
from kb.site.linkcheck import broken_links
from kb.site.render import error_page
from kb.site.views import error_view
from sitehelpers import build_fixture

RECORD_SCHEMA = json.loads((Path(__file__).parent.parent / "kb/schemas/record.schema.json").read_text())
DCP = "d97d5d8528e2b364"

KEPT = 'def f(x):\n    if x:\n        raise ValueError(f"alpha value {x} is wrong")\n'
GONE = 'def g():\n    raise ValueError("to be removed in the third release")\n'
EDITED = ['def k():\n    raise ValueError("the first message about things")\n',
          'def k():\n    raise ValueError("the first message about many things")\n',
          'def k():\n    raise ValueError("the first message about many more things")\n']
MOVING = 'def h(y):\n    if y:\n        raise ValueError(f"moving message that is long enough {y}")\n'
NEW = 'def n():\n    raise ValueError("brand new in the third release")\n'
TWICE = 'def t():\n    raise ValueError("one message raised in two files for a while")\n'

RELEASES = {
    "0.1.0": {"vllm/a.py": KEPT + GONE, "vllm/b.py": MOVING, "vllm/c.py": EDITED[0], "vllm/e.py": TWICE,
              "vllm/f.py": TWICE},
    "0.2.0": {"vllm/a.py": KEPT + GONE, "vllm/b.py": MOVING, "vllm/c.py": EDITED[1], "vllm/e.py": TWICE,
              "vllm/f.py": TWICE},
    "0.3.0": {"vllm/a.py": "\n" + KEPT, "vllm/d.py": MOVING, "vllm/c.py": EDITED[2], "vllm/n.py": NEW,
              "vllm/f.py": TWICE},
}
GONE_ID = error_id("to be removed in the third release", "vllm/a.py")
NEW_ID = error_id("brand new in the third release", "vllm/n.py")
EDIT_IDS = [error_id(t, "vllm/c.py") for t in ("the first message about things", "the first message about many things",
                                               "the first message about many more things")]
MOVED = (error_id("moving message that is long enough {y}", "vllm/b.py"),
         error_id("moving message that is long enough {y}", "vllm/d.py"))
TWICE_E = error_id("one message raised in two files for a while", "vllm/e.py")
TWICE_F = error_id("one message raised in two files for a while", "vllm/f.py")
CHANGED = {("added", None, NEW_ID), ("removed", GONE_ID, None), ("removed", TWICE_E, None),
           ("edited", EDIT_IDS[1], EDIT_IDS[2]), ("moved", *MOVED)}


def _scan(root: Path, release: str, files: dict[str, str]) -> ScanResult:
    write_tree(root, {"vllm/__init__.py": "", "vllm/_version.py": f"__version__ = {release!r}\n"} | files)
    with from_dir(root, include_vendored=False) as t:
        return scan(t, jobs=1)


@pytest.fixture(scope="module")
def scans(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, ScanResult]]:
    tmp = tmp_path_factory.mktemp("known")
    return [(name, _scan(tmp / name, name, files)) for name, files in RELEASES.items()]


def _sets(changes) -> set[tuple[str, str | None, str | None]]:
    return {(c.kind, c.old, c.new) for c in changes if c.kind in ("added", "removed", "edited", "moved")}


def test_the_wordings_give_the_history_s_own_changes(scans) -> None:
    """Every release's added, removed, edited and moved ids, read from the wordings, are those
    the history decided from the scans."""
    history = build_history(scans)
    names = tuple(n for n, _ in scans)
    from_wordings = wording_diffs(names, wordings(scans, history))
    assert [(d.old, d.new) for d in from_wordings] == [(d.old, d.new) for d in history.diffs]
    for mine, theirs in zip(from_wordings, history.diffs, strict=True):
        assert _sets(mine.changes) == _sets(theirs.changes), mine.new
    assert _sets(from_wordings[-1].changes) == CHANGED
    assert _sets(from_wordings[0].changes) == {("edited", EDIT_IDS[0], EDIT_IDS[1])}


def _build(tmp_path: Path, result: ScanResult, known) -> Path:
    out = tmp_path / "site"
    build_site(result, BuildOptions(out, jobs=1), attach_set_by(build_records(result), result.config), known=known)
    return out


def _main(html: str) -> str:
    return re.sub(r"\s+", " ", html[html.index("<main>"):html.index("</main>")])


@pytest.mark.parametrize("shipped_up_to", ["0.3.0", "0.2.0"])
def test_one_release_build_has_its_release_page(scans, tmp_path: Path, shipped_up_to: str) -> None:
    """The built release among the shipped wordings (its changes read from them), or newer than
    they are (diffed against the newest): the same sets, each linked to its page in this build."""
    history = build_history(scans)
    k = [n for n, _ in scans].index(shipped_up_to) + 1
    shipped = (tuple(n for n, _ in scans[:k]), wordings(scans[:k], build_history(scans[:k])))
    site = _build(tmp_path, scans[-1][1], known_releases(scans[-1][1], shipped))

    changes = json.loads((site / "api/releases/0.3.0/changes.json").read_text())
    got = {(s["kind"], r["old"], r["new"]) for s in changes["sections"] for r in s["rows"]
           if s["kind"] in ("added", "removed", "edited", "moved")}
    assert got == CHANGED and changes["old"] == "0.2.0" and changes["new"] == "0.3.0"
    assert changes["counts"] == {"added": 1, "removed": 2, "edited": 1, "moved": 1, "guard": None, "line": None}
    assert json.loads((site / "api/releases/0.3.0.json").read_text())["ids"] == sorted(history.present["0.3.0"])

    index = json.loads((site / "api/releases.json").read_text())
    assert index["built"] == "0.3.0"
    assert [(r["release"], r["previous"], r["errors"]) for r in index["releases"]] == [
        ("0.1.0", None, 6), ("0.2.0", "0.1.0", 6), ("0.3.0", "0.2.0", 5)]
    assert index["releases"][1]["counts"] == {"added": 0, "removed": 0, "edited": 1, "moved": 0, "guard": None,
                                              "line": None}

    page = _main((site / "releases/0.3.0/index.html").read_text())
    assert f'<a href="../../errors/{NEW_ID}/">brand new in the third release</a>' in page
    # an older id has no page in this build: shown as text, the new id linked
    assert f'<code>{EDIT_IDS[1]}</code> → <a href="../../errors/{EDIT_IDS[2]}/">' in page
    assert "was: the first message about many things" in page
    assert f'<code>{MOVED[0]}</code> → <a href="../../errors/{MOVED[1]}/">' in page
    # removed: the text only, or the live page raising the same message
    assert "<li>to be removed in the third release <span" in page and f"errors/{GONE_ID}/" not in page
    assert (f'one message raised in two files for a while <span class="where">(the same message is raised today: '
            f'<a href="../../errors/{TWICE_F}/">its page</a>)</span>') in page
    assert "raised in vllm/a.py up to 0.2.0" in page
    assert "1 added, 2 removed, 1 with an edited message, 1 moved to another file." in page

    listing = _main((site / "releases/index.html").read_text())
    assert '<tr class="built"><td><a href="0.3.0/">0.3.0</a> <strong class="this">this site</strong>' in listing
    assert "<td>0.2.0</td>" in listing and "<td>0.1.0</td>" in listing  # known, without a page here
    assert broken_links(site) == []


def test_the_default_build_lists_the_shipped_releases(tmp_path: Path) -> None:
    """`kb build`'s own kind of build (one release, the wordings kb ships): /releases/, the built
    release's page and /api/releases.json exist, and every page's footer links them."""
    site, _ = build_fixture(tmp_path)
    index = json.loads((site / "api/releases.json").read_text())
    assert index["built"] == "0.1.0"
    names = [r["release"] for r in index["releases"]]
    assert names == ["0.1.0", *published_releases()]  # the fixture's 0.1.0 is older than every published one
    newest = index["releases"][-1]
    assert newest["previous"] == published_releases()[-2] and newest["counts"]["added"] > 0
    assert (site / "releases/0.1.0/feed.xml").is_file()
    page = _main((site / "releases/0.1.0/index.html").read_text())
    assert "kb knows no release before it." in page
    listing = _main((site / "releases/index.html").read_text())
    assert f"<td>{published_releases()[-1]}</td>" in listing and 'href="0.1.0/"' in listing
    assert 'href="releases/">Releases</a>' in (site / "index.html").read_text()  # the footer
    assert broken_links(site) == []


# --- provenance: a real commit, else the tag ------------------------------------------------------
def test_a_scm_node_is_read_as_its_commit() -> None:
    assert commit_of("g62d4bc3c7") == "62d4bc3c7"  # setuptools-scm's node: "g" + the abbreviated commit
    assert commit_of("09c7792610ada9f88bbf87d32b472dd44bf23cc2") == "09c7792610ada9f88bbf87d32b472dd44bf23cc2"
    for fake in ("COMMIT_HASH_PLACEHOLDER", "h0123abcd", "g12", "", None, "main"):
        assert commit_of(fake) is None
    assert [commit_kind(c) for c in (None, "62d4bc3c7", "0" * 40)] == ["tag", "short", "full"]


def _record_and_page(tree) -> tuple[dict, str]:
    """The DCP error's API record and the provenance part of its page, as a build writes them."""
    with tree as t:
        result = scan(t, jobs=1)
    (r,) = [r for r in build_records(result) if r.id == DCP]
    info = SiteInfo(result.tree)
    record = api_record(r, info)
    jsonschema.validate(record, RECORD_SCHEMA)
    html = error_page(error_view(r, info, []), info)
    return record, html[html.index('<section id="provenance"'):]


def test_a_wheel_without_a_commit_says_its_tag(tmp_path: Path) -> None:
    files = tree_files("0.1.0") | {"vllm/_version.py": '__version__ = version = "0.1.0"\n'}
    wheel = make_wheel(tmp_path / "vllm-0.1.0-cp38-abi3-manylinux_2_28_x86_64.whl", files)
    record, provenance = _record_and_page(from_wheel(wheel, include_vendored=False))
    assert record["analyzedSha"] == "v0.1.0"
    assert (record["kb"]["commit"], record["kb"]["commitKind"]) == (None, "tag")
    assert "(release v0.1.0; the source names no commit)" in provenance and "commit <code>" not in provenance


def test_a_release_wheel_names_its_abbreviated_commit(fixture_wheel: Path) -> None:
    record, provenance = _record_and_page(from_wheel(fixture_wheel, include_vendored=False))
    assert record["analyzedSha"] == "0123abcd" and record["kb"]["commitKind"] == "short"
    assert "(commit <code>0123abcd</code>)" in provenance and "g0123abcd" not in provenance


def test_a_git_ref_names_its_whole_commit(tmp_path: Path, fixture_repo: Path) -> None:
    sha = git.Repo(fixture_repo).tags["v0.1.0"].commit.hexsha
    record, provenance = _record_and_page(from_git(str(fixture_repo), "v0.1.0", tmp_path / "cache",
                                                   include_vendored=False))
    assert record["analyzedSha"] == sha and (record["kb"]["commit"], record["kb"]["commitKind"]) == (sha, "full")
    assert f"vllm-project/vllm@{sha}</a>" in provenance


def test_a_vllm_0_5_wheel_gives_its_commit_file_and_metadata_version(tmp_path: Path) -> None:
    """vLLM 0.5 had no vllm/_version.py: the release is in the wheel's METADATA, the whole commit
    in vllm/commit_id.py."""
    sha = "09c7792610ada9f88bbf87d32b472dd44bf23cc2"
    files = {k: v for k, v in tree_files("0.5.5").items() if k != "vllm/_version.py"} | {
        "vllm/commit_id.py": f'__commit__ = "{sha}"\n',
        "vllm-0.5.5.dist-info/METADATA": "Metadata-Version: 2.1\nName: vllm\nVersion: 0.5.5\n\nVersion: 9.9.9\n"}
    with from_wheel(make_wheel(tmp_path / "w.whl", files), include_vendored=False) as t:
        assert (t.info.release, t.info.ref, t.info.commit) == ("0.5.5", "v0.5.5", sha)
        assert t.info.commit_date == "2026-03-04T05:06:08Z"
    placeholder = files | {"vllm/commit_id.py": '__commit__ = "COMMIT_HASH_PLACEHOLDER"\n'}
    with from_wheel(make_wheel(tmp_path / "p.whl", placeholder), include_vendored=False) as t:
        assert t.info.commit is None


def test_a_folder_s_version_file_is_read_the_same_way(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", tree_files("0.3.0"))
    with from_dir(root, include_vendored=False) as t:
        assert (t.info.ref, t.info.commit) == ("v0.3.0", "0123abcd")
    (root / "vllm/_version.py").write_text('__version__ = "0.3.0"\n__commit_id__ = "not a commit!"\n')
    with from_dir(root, include_vendored=False) as t:
        assert t.info.commit is None
        assert [str(w) for w in t.warnings] == ["vllm/_version.py:2: ignored: 'not a commit!' is not a commit id"]
