from __future__ import annotations

import os
import shutil
import sys
import tempfile
import textwrap
import zipfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import git
import platformdirs
import pytest

from fixture_tree import tree_files, write_tree
from kb.scan.extract import extract
from kb.model import RaiseFact


def scan_code(src: str) -> list[RaiseFact]:
    """Dedent, extract, return the raises of one snippet (any exception class)."""
    facts = extract(textwrap.dedent(src).encode())
    assert facts.error is None, facts.error
    return list(facts.raises)


# Release wheels and their parsed facts are kept between runs here, never in the user's cache.
RELEASE_CACHE = Path(os.environ.get("KB_TEST_CACHE") or platformdirs.user_cache_dir("kb-tests", appauthor=False))
# Until a fixture sets its own, everything (collection, session fixtures) uses a throw-away cache.
_SESSION_CACHE = tempfile.mkdtemp(prefix="kb-test-cache-")
os.environ["KB_CACHE_DIR"] = _SESSION_CACHE
# `kb check` reads a model's config.json from the Hugging Face cache: never the developer's
# (a cached meta-llama model would change what the tests predict); a test that wants one builds it.
_HF_CACHE = tempfile.mkdtemp(prefix="kb-test-hf-cache-")
os.environ["HF_HUB_CACHE"] = _HF_CACHE
_USER_CACHE = Path(platformdirs.user_cache_dir("kb", appauthor=False))


def _state(folder: Path) -> set[tuple[str, int]]:
    return {(str(p), p.stat().st_mtime_ns) for p in folder.rglob("*")} if folder.is_dir() else set()


_USER_CACHE_BEFORE = _state(_USER_CACHE)


def _is_release(node: pytest.Item | pytest.Module) -> bool:
    return node.get_closest_marker("release") is not None


@pytest.fixture(autouse=True, scope="module")
def _module_cache(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[None]:
    """Module-scoped fixtures (a site built once per module) run before function-scoped ones:
    they get the module's cache, set here first (autouse fixtures of a scope run first)."""
    with pytest.MonkeyPatch.context() as mp:
        release = _is_release(request.node)
        mp.setenv("KB_CACHE_DIR", str(RELEASE_CACHE if release else tmp_path_factory.mktemp("module-cache")))
        yield


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
                    request: pytest.FixtureRequest) -> None:
    """Every test gets its own cache; release tests share the test cache of release wheels."""
    release = _is_release(request.node)
    monkeypatch.setenv("KB_CACHE_DIR", str(RELEASE_CACHE if release else tmp_path_factory.mktemp("cache")))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Fail the run if any test wrote into the user's real cache."""
    shutil.rmtree(_SESSION_CACHE, ignore_errors=True)
    shutil.rmtree(_HF_CACHE, ignore_errors=True)
    if _state(_USER_CACHE) != _USER_CACHE_BEFORE:
        print(f"\nERROR: the tests changed the user's cache {_USER_CACHE}", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


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
