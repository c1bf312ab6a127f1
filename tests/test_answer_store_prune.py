"""Stale answer stores are removed (kb/store.py prune_stores): after a new store is written, the
stores of older keys of its release and kind go, but the newest few, only files kb wrote, in the
cache's answers folder, never through a symbolic link; a process reading an older store is not
disturbed."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from entryhelpers import write_entries
from kb.cli import main
from kb.store import KEEP_STORES, Sections, load_store, prune_stores, read_store, save_store, store_path, write_store

KEY = "{0:02x}" * 32  # a store's key (64 hex digits): its file name takes the first 32


def sections(n: int = 1) -> Sections:
    s = Sections()
    s.add("head", {"n": n})
    s.table("items", [{"i": i} for i in range(n)])
    return s


def place(cache: Path, release: str, key: str, kind: str = "match") -> Path:
    stem = store_path(cache, release, key)
    return stem.parent / f"{stem.name}.{kind}"  # as kb/jobs.py names it


def store(cache: Path, release: str, n: int, kind: str = "match", age: float = 0) -> Path:
    """A store written by kb, `age` seconds old."""
    key = KEY.format(n)
    path = place(cache, release, key, kind)
    write_store(path, kind, key, sections(n))
    when = time.time() - age
    os.utime(path, (when, when))
    return path


def names(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def test_only_the_newest_stores_of_the_release_and_kind_are_kept(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    old = [store(cache, "0.34.0", n, age=1000 - n) for n in range(5)]  # 0 is the oldest
    others = [store(cache, "0.34.0", 10, "search", age=5000), store(cache, "0.33.0", 11, age=5000),
              store(cache, "wheel", 12, age=5000)]
    answers = cache / "answers"
    outside = tmp_path / "outside.match"
    outside.write_text("not kb's, and not in the cache")
    link = answers / f"0.34.0-{'e' * 32}.match"  # named like a store: never followed nor removed
    link.symlink_to(outside)
    folder = answers / f"0.34.0-{'f' * 32}.match"
    folder.mkdir()
    (answers / "notes.txt").write_text("the user's")
    (answers / "0.34.0-short.match").write_text("not a name kb gives")
    stale = answers / f".{old[0].name}.abcd1234"  # an interrupted write, two hours ago
    stale.write_bytes(b"half")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    fresh = answers / f".{old[0].name}.wxyz5678"  # another process writing right now
    fresh.write_bytes(b"half")
    before = names(answers)

    new = KEY.format(99)
    where = (place(cache, "0.34.0", new), new)
    save_store(where, "match", lambda: sections(3))

    kept = {where[0].name, old[4].name, old[3].name}  # the new one and the two written last
    assert KEEP_STORES == 3
    assert names(answers) == (before | kept) - {old[0].name, old[1].name, old[2].name, stale.name}
    assert all(p.is_file() for p in others) and outside.read_text() == "not kb's, and not in the cache"
    assert link.is_symlink() and folder.is_dir() and fresh.exists()
    assert read_store(where[0], "match", new) is not None


def test_the_store_just_written_is_kept_even_with_an_older_clock(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    newer = [store(cache, "0.34.0", n, age=-1000) for n in range(3)]  # files from the future (a clock moved)
    path = store(cache, "0.34.0", 7, age=0)
    assert prune_stores(path, keep=2) == sorted(p.name for p in newer[:2])
    assert names(cache / "answers") == {path.name, newer[2].name}
    assert prune_stores(path, keep=1) == [newer[2].name] and names(cache / "answers") == {path.name}


def test_an_answers_folder_that_is_a_symbolic_link_is_left_alone(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    olds = [store(elsewhere, "0.34.0", n, age=100 - n) for n in range(4)]
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "answers").symlink_to(elsewhere / "answers")
    path = place(cache, "0.34.0", KEY.format(9))
    save_store((path, KEY.format(9)), "match", lambda: sections())
    assert all(p.is_file() for p in olds)  # written through the link, nothing removed behind it
    assert prune_stores(path) == []


def test_a_reader_of_a_pruned_store_is_not_disturbed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    old = store(cache, "0.34.0", 1, age=100)
    opened = read_store(old, "match", KEY.format(1))  # another kb process, answering from it
    assert opened is not None
    for n in range(2, 2 + KEEP_STORES):
        store(cache, "0.34.0", n, age=100 - n)
    assert prune_stores(store(cache, "0.34.0", 9)) and not old.exists()
    assert opened.json("head") == {"n": 1} and list(opened.table("items")) == [{"i": 0}]  # read in full before
    # the next read of the old key finds nothing and compiles again; no error
    assert read_store(old, "match", KEY.format(1)) is None
    assert load_store((old, KEY.format(1)), "match", lambda s: s.json("head")) is None
    # removed between its lstat and its open: read as missing, never an error
    survivor = store(cache, "0.34.0", 20)
    real_open = open

    def vanishing_open(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if Path(path) == survivor:
            survivor.unlink()
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", vanishing_open)
    assert read_store(survivor, "match", KEY.format(20)) is None


def test_prune_handles_missing_files_and_folders(tmp_path: Path) -> None:
    assert prune_stores(tmp_path / "no-such-folder" / f"0.34.0-{'a' * 32}.match") == []
    assert prune_stores(tmp_path / "not-a-store-name.match") == []


def test_kb_explain_keeps_the_newest_stores_of_a_release(fixture_wheel: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Each change of the curated entries compiles a new store; the older ones go."""
    cache = Path(os.environ["KB_CACHE_DIR"])
    errors = write_entries(tmp_path / "errors", {})
    args = ["explain", "--wheel", str(fixture_wheel), "--errors", str(errors),
            "ValueError: Total number of attention heads (32) must be divisible by tensor parallel size (3)."]
    written = []
    for n in range(KEEP_STORES + 2):
        (errors / "README.md").write_text(f"change {n}\n", encoding="utf-8")
        assert main(args) == 0
        new = set(names(cache / "answers")) - set(written)
        written += sorted(new)
    capsys.readouterr()
    assert len(written) == KEEP_STORES + 2
    assert names(cache / "answers") == set(written[-KEEP_STORES:])
