"""Builds over several releases: history, aliases, redirects, release pages, kb diff."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import make_git_repo
from entryhelpers import MEANING, write_entries
from sitehelpers import index_json
from kb.cli import main
from kb.scan.ids import error_id
from kb.site.linkcheck import broken_links

A1 = '''
def f(x):
    if x:
        raise ValueError(f"alpha {x}")


def g():
    raise ValueError("to be removed later")
'''
A3 = '''
def n():
    raise ValueError("brand new in v3")


def f(x):
    if x:
        raise ValueError(f"alpha {x}")
'''
B = '''
def h(y):
    if y:
        raise ValueError(f"moving message {y}")
'''
C1 = '''
def k():
    raise ValueError("the first message about things")
'''
C2 = C1.replace("about things", "about many things")

V1 = {"vllm/__init__.py": "", "vllm/a.py": A1, "vllm/b.py": B, "vllm/c.py": C1}
V2 = {"vllm/__init__.py": "", "vllm/a.py": A1, "vllm/d.py": B, "vllm/c.py": C2}
V3 = {"vllm/__init__.py": "", "vllm/a.py": A3, "vllm/d.py": B, "vllm/c.py": C2}

ALPHA = error_id("alpha {x}", "vllm/a.py")
GONE = error_id("to be removed later", "vllm/a.py")
NEW = error_id("brand new in v3", "vllm/a.py")
MOVED_OLD, MOVED_NEW = error_id("moving message {y}", "vllm/b.py"), error_id("moving message {y}", "vllm/d.py")
EDIT_OLD = error_id("the first message about things", "vllm/c.py")
EDIT_NEW = error_id("the first message about many things", "vllm/c.py")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("history")
    repo = tmp / "repo"
    make_git_repo(repo, {"v1": V1, "v2": V2, "v3": V3}).close()
    entries = write_entries(tmp / "errors", {"edit.yaml": f"id: {EDIT_OLD}\nmessage: the first message about things\n"
                                                         f"meaning: {MEANING}\nno_check: runs whenever k is called\n"})
    site = tmp / "site"
    code = main(["build", "--git", str(repo), "--refs", "v1,v2,v3", "--errors", str(entries), "-o", str(site), "--quiet"])
    assert code == 0
    return site, repo


def record(site: Path, ident: str) -> dict:
    return json.loads((site / f"api/errors/{ident}").read_text())


def test_history_of_a_kept_error(built) -> None:
    site, _ = built
    h = record(site, ALPHA)["kb"]["history"]
    assert (h["firstSeen"], h["lastSeen"], h["removedSince"]) == ("v1", "v3", None)
    assert [(r["release"], r["lines"]) for r in h["releases"]] == [("v1", [3]), ("v2", [3]), ("v3", [7])]
    html = (site / f"errors/{ALPHA}/index.html").read_text()
    assert "<h2>History</h2>" in html and "line moved" in html


def test_edited_and_moved_ids_become_aliases(built) -> None:
    site, _ = built
    for old, new, reason in [(EDIT_OLD, EDIT_NEW, "message edited in v2"), (MOVED_OLD, MOVED_NEW, "moved to another file in v2")]:
        alias = json.loads((site / f"api/errors/{old}").read_text())
        assert alias == {"id": old, "alias": True, "currentId": new, "currentUrl": f"/api/errors/{new}",
                         "page": f"/errors/{new}/", "reason": reason}
        assert not (site / f"api/errors/{old}.json").exists()  # written once, as every record
        assert f'url=../../errors/{new}/"' in (site / f"errors/{old}/index.html").read_text()
        assert record(site, new)["kb"]["history"]["aliases"] == [old]
        assert [r["id"] for r in record(site, new)["kb"]["history"]["releases"]] == [old, new, new]


def test_curated_entry_follows_with_a_stale_notice(built) -> None:
    site, _ = built
    r = record(site, EDIT_NEW)
    assert r["kb"]["curated"] is True
    assert r["kb"]["stale"][0] == f"written for {EDIT_OLD}, whose message was edited in v2: re-verify it for {EDIT_NEW}"
    assert "May be out of date since" in (site / f"errors/{EDIT_NEW}/index.html").read_text()


def test_removed_errors_keep_their_page(built) -> None:
    site, _ = built
    r = record(site, GONE)
    assert r["kb"]["history"]["removedSince"] == "v3" and r["kb"]["history"]["lastSeen"] == "v2"
    html = (site / f"errors/{GONE}/index.html").read_text()
    assert "No longer raised since vLLM v3." in html
    # The lookup still knows its wording, as an older one that no release raises now.
    entries = [e for e in index_json(site, "match-index")["entries"] if e["id"] == GONE]
    assert [(e["older"], e["current"]) for e in entries] == [(True, None)]


def test_release_pages_and_api(built) -> None:
    site, _ = built
    releases = json.loads((site / "api/releases.json").read_text())["releases"]
    assert [(r["release"], r["errors"]) for r in releases] == [("v1", 4), ("v2", 4), ("v3", 4)]
    assert releases[1]["counts"] == {"added": 0, "removed": 0, "edited": 1, "moved": 1, "guard": 0, "line": 0}
    assert releases[2]["counts"] == {"added": 1, "removed": 1, "edited": 0, "moved": 0, "guard": 0, "line": 1}
    assert json.loads((site / "api/releases/v3.json").read_text())["ids"] == sorted([ALPHA, NEW, MOVED_NEW, EDIT_NEW])
    page = (site / "releases/v2/index.html").read_text()
    assert "Message edited" in page and "Moved to another file" in page and "vllm/b.py -&gt; vllm/d.py" in page
    assert broken_links(site) == []
    changes = json.loads((site / "api/releases/v3/changes.json").read_text())
    assert changes["old"] == "v2" and changes["counts"]["added"] == 1
    assert [r["new"] for s in changes["sections"] if s["kind"] == "added" for r in s["rows"]] == [NEW]
    assert json.loads((site / "api/releases/v1/changes.json").read_text())["sections"] == []  # the first release


def test_atom_feed_per_release(built) -> None:
    import xml.etree.ElementTree as ET

    site, _ = built
    ns = {"a": "http://www.w3.org/2005/Atom"}
    feed = ET.fromstring((site / "releases/v3/feed.xml").read_text())
    titles = [e.findtext("a:title", namespaces=ns) for e in feed.findall("a:entry", ns)]
    assert titles == ["added: brand new in v3", "removed: to be removed later"]  # a moved line alone is not news
    links = [e.find("a:link", ns).get("href") for e in feed.findall("a:entry", ns)]  # type: ignore[union-attr]
    assert links == [f"/errors/{NEW}/", f"/errors/{GONE}/"]
    v2 = ET.fromstring((site / "releases/v2/feed.xml").read_text())
    assert len(v2.findall("a:entry", ns)) == 2  # an edited message and a moved file


def test_kb_diff_formats(built, capsys) -> None:
    _, repo = built
    assert main(["diff", "v2", "v3", "--git", str(repo)]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0] == ("vLLM v2 -> v3: 1 added, 1 removed, 0 edited, 0 moved, 0 with a changed guard, "
                                    "1 at a moved line")
    assert f"  {NEW}  brand new in v3" in text and f"  {GONE}  to be removed later" in text
    assert main(["diff", "v1", "v2", "--git", str(repo), "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("## vLLM v1 -> v2:") and f"- `{EDIT_OLD} -> {EDIT_NEW}`" in md
    assert main(["diff", "v1", "v2", "--git", str(repo), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["counts"]["moved"] == 1 and data["sections"][3]["rows"][0]["old"] == MOVED_OLD


def test_rebuild_keeps_every_unchanged_file(built, tmp_path: Path) -> None:
    site, repo = built
    inodes = {p: p.stat().st_ino for p in site.rglob("*") if p.is_file() and p.name != ".kb-build.json.gz"}
    entries = site.parent / "errors"
    assert main(["build", "--git", str(repo), "--refs", "v1,v2,v3", "--errors", str(entries), "-o", str(site),
                 "--quiet"]) == 0
    assert {p: p.stat().st_ino for p in site.rglob("*") if p.is_file() and p.name != ".kb-build.json.gz"} == inodes


def test_the_lookup_knows_every_wording_of_every_release(built, capsys) -> None:
    """The match index of a multi-release build holds the older wordings too, each with the
    releases that raised it and what became of it; the lookup ranks the release's own wording
    first and says what an older one reads now."""
    site, _ = built
    index = index_json(site, "match-index")
    by_id = {e["id"]: e for e in index["entries"]}
    assert by_id[ALPHA]["releases"] == ["v1", "v3"] and not by_id[ALPHA].get("older")
    edited = by_id[EDIT_OLD]
    assert (edited["older"], edited["releases"], edited["current"], edited["endedIn"]) == (True, ["v1", "v1"],
                                                                                          EDIT_NEW, "v2")
    assert by_id[MOVED_OLD]["current"] == MOVED_NEW and by_id[MOVED_OLD]["page"] == MOVED_NEW
    gone = by_id[GONE]
    assert (gone["current"], gone["endedIn"], gone["page"]) == (None, "v3", GONE)  # its removed page

    assert main(["explain", "--site", str(site), "--json", "ValueError: the first message about things"]) == 0
    (found,) = json.loads(capsys.readouterr().out)["found"]
    assert (found["match"]["id"], found["match"]["olderWording"], found["match"]["currentId"]) == (
        EDIT_OLD, True, EDIT_NEW)
    assert found["match"]["url"] == f"/errors/{EDIT_NEW}/"
    assert main(["explain", "--site", str(site), "ValueError: the first message about things"]) == 0
    assert "This is the wording of vLLM v1; since v2 it reads: the first message about many things -> " \
           f"{EDIT_NEW}" in capsys.readouterr().out
    assert main(["explain", "--site", str(site), "ValueError: to be removed later"]) == 0
    assert "Raised up to vLLM v2 (from v1); removed in v3." in capsys.readouterr().out
    # The release's own wording first, older wording next: "alpha 5" is only ever the current id.
    assert main(["explain", "--site", str(site), "--json", "alpha 5"]) == 0
    assert json.loads(capsys.readouterr().out)["found"][0]["match"]["id"] == ALPHA


def test_a_message_followed_across_files_and_renamed_functions(tmp_path: Path) -> None:
    from fixture_tree import write_tree
    from kb.releases.history import diff_scans
    from kb.scan.scanner import scan
    from kb.scan.source import from_dir

    long = "a message long enough to be followed across files"

    def scanned(name: str, files: dict[str, str]):
        write_tree(tmp_path / name, {"vllm/__init__.py": ""} | files)
        with from_dir(tmp_path / name, include_vendored=False) as t:
            return scan(t, jobs=1)

    old = scanned("v1", {"vllm/x.py": f"def old_name():\n    raise ValueError({long!r})\n",
                         "vllm/s.py": "def f():\n    raise ValueError('too short')\n"})
    new = scanned("v2", {"vllm/y.py": f"def new_name():\n    raise ValueError({long!r})\n",
                         "vllm/t.py": "def g():\n    raise ValueError('too short')\n"})
    d = diff_scans(old, new, "v1", "v2")
    assert [(c.kind, c.old, c.new) for c in d.of("moved")] == [
        ("moved", error_id(long, "vllm/x.py"), error_id(long, "vllm/y.py"))]
    assert [c.old for c in d.of("removed")] == [error_id("too short", "vllm/s.py")]  # too short to follow


# --- following a message between two releases ------------------------------------------------------
def _scan_files(root: Path, files: dict[str, str]):
    from fixture_tree import write_tree
    from kb.scan.scanner import scan
    from kb.scan.source import from_dir

    write_tree(root, {"vllm/__init__.py": ""} | files)
    with from_dir(root, include_vendored=False) as t:
        return scan(t, jobs=1)


def _links(tmp_path: Path, old: dict[str, str], new: dict[str, str]) -> dict[str, tuple[str, str]]:
    from kb.releases.history import diff_scans

    d = diff_scans(_scan_files(tmp_path / "old", old), _scan_files(tmp_path / "new", new), "1", "2")
    return {c.old: (c.kind, c.new) for c in d.changes if c.kind in ("moved", "edited", "removed") and c.old}


LONG = "Ray does not allocate any GPUs on the driver node. Consider adjusting the placement group."


def test_one_message_in_two_files_follows_the_closest_copy(tmp_path: Path) -> None:
    """Two copies of one message become one: the copy of the same function name is followed;
    the other is removed (a pairing by text alone refused both before)."""
    src = 'class {cls}:\n    def {fn}(self):\n        raise ValueError("{msg}")\n'
    old = {"vllm/ray_gpu.py": src.format(cls="RayGPU", fn="_init_workers_ray", msg=LONG),
           "vllm/ray_hpu.py": src.format(cls="RayHPU", fn="_start", msg=LONG)}
    new = {"vllm/ray_distributed.py": src.format(cls="RayDistributed", fn="_init_workers_ray", msg=LONG)}
    links = _links(tmp_path, old, new)
    gpu, hpu = error_id(LONG, "vllm/ray_gpu.py"), error_id(LONG, "vllm/ray_hpu.py")
    assert links[gpu] == ("moved", error_id(LONG, "vllm/ray_distributed.py"))
    assert links[hpu] == ("removed", None)


def test_renamed_placeholders_in_a_moved_file_are_the_same_message(tmp_path: Path) -> None:
    old = {"vllm/lora/worker_manager.py": 'def load(lora, cfg):\n    raise ValueError(\n        f"LoRA rank '
                                          '{lora.rank} is greater than max_lora_rank {cfg.max_lora_rank}.")\n'}
    new = {"vllm/lora/peft_helper.py": 'def validate(rank, max_rank):\n    raise ValueError(f"LoRA rank {rank} is '
                                       'greater than max_lora_rank {max_rank}.")\n'}
    links = _links(tmp_path, old, new)
    (kind, target), = links.values()
    assert kind == "moved" and target == error_id("LoRA rank {rank} is greater than max_lora_rank {max_rank}.",
                                                  "vllm/lora/peft_helper.py")


def test_a_message_that_grew_and_a_renamed_function_are_edits(tmp_path: Path) -> None:
    grew_old = 'class DeviceConfig:\n    def __init__(self):\n        raise RuntimeError("Failed to infer device type")\n'
    grew_new = ('class DeviceConfig:\n    def __post_init__(self):\n        raise RuntimeError("Failed to infer '
                'device type, please set VLLM_LOGGING_LEVEL=DEBUG to see why.")\n')
    renamed_old = 'def check_memory(n):\n    raise ValueError(f"To serve one request ({n}) more KV cache is needed. Try it")\n'
    renamed_new = 'def _check_memory(n):\n    raise ValueError(f"To serve one request ({n}) more KV cache is needed.Try it")\n'
    links = _links(tmp_path, {"vllm/config.py": grew_old, "vllm/kv.py": renamed_old},
                   {"vllm/config.py": grew_new, "vllm/kv.py": renamed_new})
    assert links[error_id("Failed to infer device type", "vllm/config.py")][0] == "edited"
    assert links[error_id("To serve one request ({n}) more KV cache is needed. Try it", "vllm/kv.py")] == (
        "edited", error_id("To serve one request ({n}) more KV cache is needed.Try it", "vllm/kv.py"))
    unrelated = 'def other():\n    raise ValueError("Failed to infer the dtype")\n'
    links = _links(tmp_path / "2", {"vllm/config.py": grew_old}, {"vllm/config.py": unrelated})
    assert links[error_id("Failed to infer device type", "vllm/config.py")] == ("removed", None)


def test_a_message_that_became_a_part_of_a_joined_list_is_followed(tmp_path: Path) -> None:
    """LoRA's rank check moved into a list of problems joined at the raise (vLLM 0.7): the new
    id's template is `{' '.join(error_msg)}`, its part is the old message."""
    old = {"vllm/lora/worker_manager.py": 'def load(lora, cfg):\n    raise ValueError(\n        f"LoRA rank '
                                          '{lora.rank} is greater than max_lora_rank {cfg.max_lora_rank}.")\n'}
    new = {"vllm/lora/peft_helper.py": 'def validate(rank, max_rank):\n    error_msg = []\n    if rank > max_rank:\n'
                                       '        error_msg.append(f"LoRA rank {rank} is greater than max_lora_rank '
                                       '{max_rank}.")\n    raise ValueError(" ".join(error_msg))\n'}
    (kind, target), = _links(tmp_path, old, new).values()
    assert kind == "moved" and target == error_id("{' '.join(error_msg)}", "vllm/lora/peft_helper.py")


def test_atom_feed_holds_a_hostile_title_as_text() -> None:
    import xml.etree.ElementTree as ET

    from kb.model import TreeInfo
    from kb.site.api import SiteInfo
    from kb.site.releases import atom_feed

    evil = "bad\x01</title><script>alert(1)</script> & more"
    view = {"sections": [{"kind": "added", "rows": [{"old": None, "new": "abc", "title": evil, "detail": ""}]}]}
    info = SiteInfo(TreeInfo("git", "x", "v9", None, "2026-01-02T03:04:05Z", "v9"), site_url="https://kb.example")
    feed = ET.fromstring(atom_feed("v9", view, info))
    ns = {"a": "http://www.w3.org/2005/Atom"}
    entry = feed.find("a:entry", ns)
    assert entry is not None and entry.findtext("a:title", namespaces=ns) == "added: bad\ufffd</title><script>alert(1)</script> & more"
    assert feed.findtext("a:updated", namespaces=ns) == "2026-01-02T03:04:05Z"  # the release's date, never the clock
