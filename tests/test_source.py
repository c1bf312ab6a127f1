from __future__ import annotations

import zipfile
from pathlib import Path

import git
import pytest

from conftest import make_wheel
from fixture_tree import tree_files, write_tree
from kb.errors import SourceError
from kb.paths import cache_dir
from kb.scan.scanner import scan
from kb.scan.source import download_wheel, from_dir, from_git, from_wheel, version_info

DCP = "d97d5d8528e2b364"


def dcp_line(tree) -> int:
    return next(s.line for s in scan(tree, jobs=1).sites if s.id == DCP)


def test_plain_folder(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", tree_files("0.3.0"))
    with from_dir(root, include_vendored=False) as t:
        assert (t.info.kind, t.info.ref, t.info.commit, t.info.release, t.info.commit_date) == (
            "dir", "v0.3.0", "0123abcd", "0.3.0", None)  # setuptools-scm's node g0123abcd
        assert "vllm/third_party/vendored.py" not in t.paths and t.excluded == 1
        assert "setup.py" not in t.paths
        assert t.paths == sorted(t.paths)
    with from_dir(root, include_vendored=True) as t:
        assert "vllm/third_party/vendored.py" in t.paths and t.excluded == 0


def test_git_work_tree_uses_git_file_list(fixture_repo: Path) -> None:
    (fixture_repo / "vllm/untracked.py").write_text("raise ValueError('untracked')\n")
    (fixture_repo / ".gitignore").write_text("vllm/ignored.py\n")
    (fixture_repo / "vllm/ignored.py").write_text("raise ValueError('ignored')\n")
    repo = git.Repo(fixture_repo)
    head = repo.head.commit.hexsha
    with from_dir(fixture_repo, include_vendored=False) as t:
        assert "vllm/untracked.py" not in t.paths and "vllm/ignored.py" not in t.paths
        assert (t.info.ref, t.info.commit, t.info.commit_date, t.info.dirty) == (head, head, "2026-02-15T12:00:00Z", False)
    (fixture_repo / "vllm/decoding.py").write_text("# changed\n")
    with from_dir(fixture_repo, include_vendored=False) as t:
        assert t.info.dirty is True
        assert t.read("vllm/decoding.py") == b"# changed\n"  # the work tree, as the user has it


@pytest.mark.parametrize("as_url", [False, True])
def test_git_refs_read_from_object_store(fixture_repo: Path, as_url: bool) -> None:
    url = fixture_repo.as_uri() if as_url else str(fixture_repo)
    shas = {t.name: t.commit.hexsha for t in git.Repo(fixture_repo).tags}
    with from_git(url, "v0.1.0", cache_dir(), include_vendored=False) as t:
        assert (t.info.kind, t.info.ref, t.info.commit, t.info.commit_date, t.info.release) == (
            "git", shas["v0.1.0"], shas["v0.1.0"], "2026-01-15T12:00:00Z", "0.1.0")
        assert dcp_line(t) == 23
    with from_git(url, "v0.2.0", cache_dir(), include_vendored=False) as t:
        assert dcp_line(t) == 25
    clones = list((cache_dir() / "git").iterdir())
    assert len(clones) == 1 and (clones[0] / "HEAD").is_file() and not (clones[0] / "vllm").exists()


def test_git_fetches_refs_made_after_the_clone(fixture_repo: Path) -> None:
    with from_git(str(fixture_repo), "v0.1.0", cache_dir(), include_vendored=False):
        pass
    repo = git.Repo(fixture_repo)
    (fixture_repo / "vllm/new.py").write_text("def f():\n    raise ValueError('new in v0.3.0')\n")
    repo.git.add("-A")
    repo.index.commit("v0.3.0")
    repo.create_tag("v0.3.0")
    with from_git(str(fixture_repo), "v0.3.0", cache_dir(), include_vendored=False) as t:
        assert "vllm/new.py" in t.paths


def test_git_missing_ref_and_missing_repo(fixture_repo: Path, tmp_path: Path) -> None:
    with pytest.raises(SourceError) as e:
        from_git(str(fixture_repo), "v9.9.9", cache_dir(), include_vendored=False)
    assert str(e.value) == f"ref 'v9.9.9' not found in {fixture_repo}"
    with pytest.raises(SourceError, match="no such repository"):
        from_git(str(tmp_path / "nope"), "main", cache_dir(), include_vendored=False)
    with pytest.raises(SourceError, match=r"^cannot clone file:///"):
        from_git((tmp_path / "nope").as_uri(), "main", cache_dir(), include_vendored=False)


def test_wheel(fixture_wheel: Path) -> None:
    with from_wheel(fixture_wheel, include_vendored=False) as t:
        assert (t.info.kind, t.info.ref, t.info.commit, t.info.release, t.info.commit_date) == (
            "wheel", "v0.1.0", "0123abcd", "0.1.0", "2026-03-04T05:06:08Z")
        assert t.excluded == 1
        assert dcp_line(t) == 23


def test_wheel_flash_attn_is_excluded_too(tmp_path: Path) -> None:
    files = tree_files("0.1.0") | {"vllm/vllm_flash_attn/fa.py": "raise ValueError('copied in')\n"}
    with from_wheel(make_wheel(tmp_path / "w.whl", files), include_vendored=False) as t:
        assert t.excluded == 2 and not any("flash_attn" in p for p in t.paths)


def test_bad_wheels(tmp_path: Path) -> None:
    bad = tmp_path / "bad.whl"
    bad.write_bytes(b"not a zip at all")
    with pytest.raises(SourceError) as e:
        from_wheel(bad, include_vendored=False)
    assert str(e.value) == f"{bad}: not a valid wheel (zip): File is not a zip file"
    with pytest.raises(SourceError, match="no such wheel file"):
        from_wheel(tmp_path / "missing.whl", include_vendored=False)
    empty = tmp_path / "empty.whl"
    with zipfile.ZipFile(empty, "w") as z:
        z.writestr("other/x.py", "")
    with pytest.raises(SourceError, match="the wheel holds no vllm/ package"):
        from_wheel(empty, include_vendored=False)


def test_corrupt_member_is_a_source_error(tmp_path: Path) -> None:
    path = make_wheel(tmp_path / "w.whl", tree_files("0.1.0"))
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("vllm/config/model.py")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    for i in range(start + 5, start + 40):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    with from_wheel(path, include_vendored=False) as t, pytest.raises(SourceError, match=r"corrupt wheel member vllm/config/model\.py"):
        t.read("vllm/config/model.py")


def test_download_failures_are_clear() -> None:
    with pytest.raises(SourceError) as e:
        download_wheel("99.0.0", cache_dir())
    assert str(e.value) == "could not download vllm==99.0.0 from the package index: No matching distribution found for vllm==99.0.0"
    with pytest.raises(SourceError, match="not a version"):
        download_wheel("1.0; rm -rf /", cache_dir())
    assert not list((cache_dir() / "wheels").glob("*"))  # nothing half-written


def test_version_info_reads_without_running() -> None:
    assert version_info(b"__version__ = version = '0.33.0'\n__commit_id__ = commit_id = 'g4ba787ec9'\n") == ("0.33.0", "g4ba787ec9")
    assert version_info(b"import os; os.system('boom')\n") == (None, None)
    assert version_info(b"def (") == (None, None)


def test_a_warm_wheel_rescan_reads_only_files_with_sites(fixture_wheel: Path, tmp_path: Path) -> None:
    from kb.scan.factcache import FactCache

    cache = FactCache(tmp_path / "facts")
    with from_wheel(fixture_wheel, include_vendored=False) as t:
        first = scan(t, jobs=1, cache=cache)
    with from_wheel(fixture_wheel, include_vendored=False) as t:
        read, seen = t.read, []
        t.read = lambda p: seen.append(p) or read(p)  # type: ignore[method-assign]
        second = scan(t, jobs=1, cache=cache)
    assert sorted(set(seen)) == sorted({s.file for s in first.sites})  # for their excerpts, nothing else
    assert [(s.id, s.fact, s.excerpt) for s in first.sites] == [(s.id, s.fact, s.excerpt) for s in second.sites]
    assert first.bytes == second.bytes and first.file_keys == second.file_keys
    cache.close()


def _full_wheel(path: Path) -> Path:
    make_wheel(path, tree_files("0.1.0") | {"vllm-0.1.0.dist-info/METADATA": "Name: vllm\nVersion: 0.1.0\n"})
    with zipfile.ZipFile(path, "a") as z:  # what makes a real wheel big: compiled code
        z.writestr(zipfile.ZipInfo("vllm/_C.abi3.so", date_time=(2026, 3, 4, 5, 6, 8)), bytes(range(256)) * 400)
    return path


def test_a_slim_wheel_is_the_same_tree(tmp_path: Path) -> None:
    """Only the Python files and metadata stay; names, dates, CRCs and sizes are the members',
    so the scan (ids, excerpts, facts-cache keys) is the same."""
    from kb.model import ScanResult
    from kb.scan.source import is_slim, slim_wheel

    full = _full_wheel(tmp_path / "vllm-0.1.0-cp38-abi3-manylinux_2_28_x86_64.whl")
    before = {i.filename: (i.CRC, i.file_size, i.date_time) for i in zipfile.ZipFile(full).infolist()}
    with from_wheel(full, include_vendored=False) as t:
        scanned: ScanResult = scan(t, jobs=1)
        stamps = {p: t.stamp(p) for p in t.paths} if t.stamp else {}
    size = full.stat().st_size
    slim_wheel(full)
    after = {i.filename: (i.CRC, i.file_size, i.date_time) for i in zipfile.ZipFile(full).infolist()}
    assert after == {n: v for n, v in before.items() if not n.endswith(".so")} and is_slim(full)
    assert full.stat().st_size < size / 2
    with from_wheel(full, include_vendored=False) as t:
        assert scan(t, jobs=1).sites == scanned.sites
        assert ({p: t.stamp(p) for p in t.paths} if t.stamp else {}) == stamps


def test_download_keeps_the_python_files_unless_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`pip download` faked: the downloaded wheel is slimmed; `--keep-wheel` keeps it whole, and
    asks for it again when only a slim one is cached."""
    import subprocess

    from kb.scan import source
    from kb.scan.source import is_slim

    calls = []

    def fake_pip(cmd: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        _full_wheel(Path(cmd[cmd.index("-d") + 1]) / "vllm-0.1.0-cp38-abi3-manylinux_2_28_x86_64.whl")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(source.subprocess, "run", fake_pip)
    cache = tmp_path / "cache"
    wheel = download_wheel("0.1.0", cache)
    assert is_slim(wheel) and len(calls) == 1
    assert download_wheel("0.1.0", cache) == wheel and len(calls) == 1  # cached
    whole = download_wheel("0.1.0", cache, keep=True)
    assert not is_slim(whole) and len(calls) == 2 and "vllm/_C.abi3.so" in zipfile.ZipFile(whole).namelist()
    assert download_wheel("0.1.0", cache, keep=True) == whole and len(calls) == 2
    assert sorted(p.name for p in (cache / "wheels").iterdir()) == [whole.name]  # no temporary left


def _clone_in(cache: Path) -> Path:
    (clone,) = (cache / "git").iterdir()
    return clone


def _replace(path: Path, data: bytes) -> None:
    """Write a new file: a local clone shares its objects with the source repo by hard links."""
    path.unlink()
    path.write_bytes(data)


def _damage(clone: Path, what: str) -> None:
    if what == "objects":  # every loose object: git finds them "missing"
        for obj in (clone / "objects").glob("??/*"):
            _replace(obj, b"junk\n")
    else:
        _replace(clone / what, {"HEAD": b"garbage\n", "config": b"[[[\n", "packed-refs": b"garbage\n"}[what])


@pytest.mark.parametrize("what", ["HEAD", "config", "packed-refs", "objects"])
def test_a_damaged_cached_clone_is_cloned_again(capsys, monkeypatch, tmp_path: Path, what: str) -> None:
    from conftest import make_git_repo
    from kb.cli import main

    cache = tmp_path / "cache"
    monkeypatch.setenv("KB_CACHE_DIR", str(cache))
    make_git_repo(tmp_path / "repo", {"v0.1.0": tree_files("0.1.0")}).close()
    argv = ["scan", "--git", str(tmp_path / "repo"), "--ref", "v0.1.0", "--quiet", "--no-cache"]
    assert main(argv) == 0
    first = capsys.readouterr().out
    _damage(_clone_in(cache), what)
    assert main(argv) == 0
    assert capsys.readouterr().out == first
    assert (_clone_in(cache) / "HEAD").read_text() == "ref: refs/heads/main\n"


def test_a_damaged_clone_that_cannot_be_cloned_again_stays(capsys, monkeypatch, tmp_path: Path) -> None:
    from conftest import make_git_repo
    from kb.cli import main

    cache = tmp_path / "cache"
    monkeypatch.setenv("KB_CACHE_DIR", str(cache))
    make_git_repo(tmp_path / "repo", {"v0.1.0": tree_files("0.1.0")}).close()
    url = (tmp_path / "repo").as_uri()
    assert main(["scan", "--git", url, "--ref", "v0.1.0", "--quiet", "--no-cache"]) == 0
    capsys.readouterr()
    _damage(_clone_in(cache), "HEAD")
    (tmp_path / "repo").rename(tmp_path / "gone")
    assert main(["scan", "--git", url, "--ref", "v0.1.0", "--quiet", "--no-cache"]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"Error: cannot clone {url}: fatal: '{tmp_path}/repo' does not appear to be a git repository")
    assert (_clone_in(cache) / "HEAD").read_bytes() == b"garbage\n"  # kept: nothing better to put there
    assert [p.name for p in (cache / "git").iterdir()] == [_clone_in(cache).name]  # no temporary folder left


def test_a_blob_that_cannot_be_read_is_a_located_error(capsys, monkeypatch, tmp_path: Path) -> None:
    from conftest import make_git_repo
    from kb.cli import main

    cache = tmp_path / "cache"
    monkeypatch.setenv("KB_CACHE_DIR", str(cache))
    repo = make_git_repo(tmp_path / "repo", {"v0.1.0": tree_files("0.1.0")})
    sha = repo.git.rev_parse("v0.1.0:vllm/decoding.py")
    repo.close()
    argv = ["scan", "--git", str(tmp_path / "repo"), "--ref", "v0.1.0", "--quiet", "--no-cache"]
    assert main(argv) == 0
    clone = _clone_in(cache)
    obj = clone / "objects" / sha[:2] / sha[2:]
    data = obj.read_bytes()
    _replace(obj, data[: len(data) // 2])  # its header reads, its text does not
    assert main(argv) == 1
    line = capsys.readouterr().err.splitlines()[-1]
    assert line.startswith(f"Error: vllm/decoding.py: git cannot read it from the cached clone {clone}: ")
    assert line.endswith(" (delete that folder to clone it again)")
