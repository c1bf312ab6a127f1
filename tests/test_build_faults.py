"""Build faults: a build killed with -9 (its temporary folder and its workers), a folder that
cannot be written, an immutable site, a full disk, a target that is not a kb site."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kb.errors import KBError
from kb.records.merge import attach_set_by, build_records
from kb.site import output
from kb.site.build import BuildOptions, build_site
from sitehelpers import build_fixture, fixture_scan

HOLDER = """
import os, sys, time
from pathlib import Path
from kb.site.output import Output
from kb.workers import worker_pool

def pid(_):
    time.sleep(0.2)
    return os.getpid()

out = Output(Path(sys.argv[1]))
(out.tmp / "big.bin").write_bytes(b"x" * 1_000_000)
pool = worker_pool(2)
pids = set()
while len(pids) < 2:
    pids |= set(pool.map(pid, range(4)))
print(out.tmp, *sorted(pids), flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except OSError:
        return True


def test_a_killed_build_leaves_no_workers_and_its_folder_is_removed_by_the_next(tmp_path: Path) -> None:
    site = tmp_path / "site"
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(site)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        folder, *workers = proc.stdout.readline().split()
        assert Path(folder).is_dir() and len(workers) == 2
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        deadline = time.monotonic() + 60  # generous: the machine is shared
        while any(_alive(int(w)) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(int(w)) for w in workers), "workers outlived the killed build"
    finally:
        if proc.poll() is None:
            proc.kill()
    other = tmp_path / ".other.building-x"  # another target's folder: not this build's business
    other.mkdir()
    build_fixture(tmp_path, out=site)
    assert not Path(folder).exists()
    assert other.is_dir()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".site.")) == []


def test_only_folders_of_dead_builds_are_stale(tmp_path: Path) -> None:
    target = tmp_path / "site"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)

    def folder(name: str, owner: str | None, age: float = 0) -> Path:
        path = tmp_path / name
        path.mkdir()
        (path / "page.html").write_text("x")
        if owner is not None:
            (path / output.OWNER).write_text(owner)
        if age:
            os.utime(path, (time.time() - age, time.time() - age))
        return path

    me = f"{os.getpid()} {output._process_start(os.getpid())}\n"
    stale = [folder(".site.building-dead", f"{dead_pid} 1\n"), folder(".site.old-dead", f"{dead_pid}\n"),
             folder(".site.building-reused", f"{os.getpid()} 1\n"),  # a live pid, but started at another time
             folder(".site.building-garbled", "not a pid\n"),
             folder(".site.building-unowned-old", None, age=2 * output.UNOWNED_AGE)]
    kept = [folder(".site.building-live", me), folder(".site.old-live", me),
            folder(".site.building-unowned-new", None),  # a build that has not written its owner yet
            folder(".sitex.building-dead", f"{dead_pid}\n")]
    assert sorted(output.remove_stale(target)) == sorted(stale)
    assert all(not p.exists() for p in stale) and all(p.is_dir() for p in kept)


def _site_state(site: Path) -> dict[str, bytes]:
    return {str(p.relative_to(site)): p.read_bytes() for p in sorted(site.rglob("*")) if p.is_file()}


def _leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(".site."))


@pytest.fixture
def built(tmp_path: Path):
    site, _ = build_fixture(tmp_path)
    scan = fixture_scan(tmp_path / "tree2")
    return site, scan, _site_state(site)


def _rebuild(site: Path, scan) -> None:
    build_site(scan, BuildOptions(site, site_url="https://example.invalid", jobs=1), attach_set_by(build_records(scan), scan.config))


def test_an_immutable_site_is_an_error_and_stays(built, monkeypatch) -> None:
    site, scan, before = built
    real = os.replace

    def replace(src, dst):  # what `chattr +i site` does to the rename
        if Path(src) == site:
            raise PermissionError(errno.EPERM, "Operation not permitted", str(src), str(dst))
        return real(src, dst)

    monkeypatch.setattr(output.os, "replace", replace)
    with pytest.raises(KBError) as e:
        _rebuild(site, scan)
    assert str(e.value) == f"{site}: cannot write the site: Operation not permitted"
    assert _site_state(site) == before and _leftovers(site.parent) == []


def test_a_failed_swap_puts_the_old_site_back(built, monkeypatch) -> None:
    site, scan, before = built
    real = os.replace

    def replace(src, dst):
        if Path(dst) == site and ".site.building-" in str(src):  # the new site cannot go in; the old one can
            raise OSError(errno.EXDEV, "Invalid cross-device link", str(src), str(dst))
        return real(src, dst)

    monkeypatch.setattr(output.os, "replace", replace)
    with pytest.raises(KBError, match="cannot write the site: Invalid cross-device link"):
        _rebuild(site, scan)
    assert _site_state(site) == before and _leftovers(site.parent) == []


def test_a_full_disk_is_an_error_and_the_old_site_stays(built, monkeypatch) -> None:
    site, scan, before = built
    written = []

    def full(path, mode="r", *args, **kwargs):
        if "w" in mode:
            written.append(path)
            if len(written) > 5:
                raise OSError(errno.ENOSPC, "No space left on device", path)
        return open(path, mode, *args, **kwargs)

    monkeypatch.setattr(output, "open", full, raising=False)
    with pytest.raises(KBError) as e:
        _rebuild(site, scan)
    assert str(e.value) == f"{site}: cannot write the site: No space left on device"
    assert _site_state(site) == before and _leftovers(site.parent) == []


def test_a_folder_that_cannot_be_written_is_an_error(built, monkeypatch, capsys) -> None:
    site, scan, before = built

    def refused(*args, **kwargs):  # what a read-only parent folder does (root ignores chmod)
        raise PermissionError(errno.EACCES, "Permission denied", str(site.parent / ".site.building-x"))

    monkeypatch.setattr(output.tempfile, "mkdtemp", refused)
    with pytest.raises(KBError) as e:
        _rebuild(site, scan)
    assert str(e.value) == f"{site}: cannot write the site: Permission denied"
    assert _site_state(site) == before and _leftovers(site.parent) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_parent_for_real(built) -> None:
    site, scan, before = built
    site.parent.chmod(0o555)
    try:
        with pytest.raises(KBError, match="cannot write the site: Permission denied"):
            _rebuild(site, scan)
    finally:
        site.parent.chmod(0o755)
    assert _site_state(site) == before


def test_only_a_kb_site_is_replaced(tmp_path: Path, capsys) -> None:
    from fixture_tree import tree_files, write_tree
    from kb.cli import main

    tree = write_tree(tmp_path / "tree", tree_files("0.1.0", broken=False))
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "thesis.tex").write_text("mine")
    for target, problem in [(notes, "not a folder: kb replaces only a site folder"),
                            (folder, "not a site built by kb (no .kb-build.json.gz): kb replaces only its own site "
                                     "folder")]:
        assert main(["build", "--source", str(tree), "-o", str(target), "--quiet", "--jobs", "1"]) == 1
        assert capsys.readouterr().err.splitlines()[-1] == f"Error: {target}: cannot write the site: {problem}"
    assert notes.read_text() == "mine" and (folder / "thesis.tex").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "notes.txt", "tree"]
    (tmp_path / "empty").mkdir()
    assert main(["build", "--source", str(tree), "-o", str(tmp_path / "empty"), "--quiet", "--jobs", "1"]) == 0


def test_any_other_write_failure_is_one_line(tmp_path: Path, capsys, monkeypatch) -> None:
    """A command that writes outside the site (kb scan -o, kb new) on a full disk: one line, exit 1."""
    from fixture_tree import tree_files, write_tree
    from kb import files
    from kb.cli import main

    tree = write_tree(tmp_path / "tree", tree_files("0.1.0", broken=False))

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "scan.json"))

    monkeypatch.setattr(files.tempfile, "mkstemp", full)
    assert main(["scan", "--source", str(tree), "-o", str(tmp_path / "scan.json"), "--quiet", "--jobs", "1"]) == 1
    assert capsys.readouterr().err == f"Error: {tmp_path / 'scan.json'}: No space left on device\n"
    assert not (tmp_path / "scan.json").exists()
