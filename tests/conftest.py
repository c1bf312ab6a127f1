from __future__ import annotations

import textwrap
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import git
import pytest

from fixture_tree import tree_files, write_tree
from kb.extract import extract
from kb.model import RaiseFact


def scan_code(src: str) -> list[RaiseFact]:
    """Dedent, extract, return the raises of one snippet (any exception class)."""
    facts = extract(textwrap.dedent(src).encode())
    assert facts.error is None, facts.error
    return list(facts.raises)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, request) -> None:
    """Every test gets its own cache, except the release tests that share the user cache."""
    if request.node.get_closest_marker("release") is None:
        monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


def make_git_repo(path: Path, tags: dict[str, dict[str, str]]) -> git.Repo:
    """A real git repo with one commit per tag, each holding exactly the given files."""
    repo = git.Repo.init(path, initial_branch="main")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "KB Tests")
        cw.set_value("user", "email", "kb@example.invalid")
    for i, (tag, files) in enumerate(tags.items()):
        for tracked in repo.git.ls_files().splitlines():
            (path / tracked).unlink()
        write_tree(path, files)
        repo.git.add("-A")
        date = f"{int(datetime(2026, i + 1, 15, 12, tzinfo=timezone.utc).timestamp())} +0000"
        repo.index.commit(f"release {tag}", author_date=date, commit_date=date)
        repo.create_tag(tag)
    return repo


@pytest.fixture
def fixture_repo(tmp_path: Path) -> Path:
    root = tmp_path / "vllm-repo"
    make_git_repo(root, {"v0.1.0": tree_files("0.1.0"), "v0.2.0": tree_files("0.2.0", moved=True)}).close()
    return root


def make_wheel(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for rel, text in sorted(files.items()):
            info = zipfile.ZipInfo(rel, date_time=(2026, 3, 4, 5, 6, 8))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, textwrap.dedent(text).lstrip("\n"))
    return path


@pytest.fixture
def fixture_wheel(tmp_path: Path) -> Path:
    return make_wheel(tmp_path / "vllm-0.1.0-cp38-abi3-manylinux_2_28_x86_64.whl", tree_files("0.1.0"))
