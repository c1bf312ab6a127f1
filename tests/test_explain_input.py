"""kb explain on hostile input: bytes that are not UTF-8, a match index of the wrong shape, a
damaged cached index, an input larger than the limit."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixture_tree import tree_files, write_tree
from kb.cli import main
from kb.explain.paste import read_paste

DCP = "d97d5d8528e2b364"
FILLED = ("The model's number of query heads per KV head (6) must be divisible by "
          "`--decode-context-parallel-size` (4) for GQA/MQA.")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "tree", tree_files("0.1.0", broken=False))


def run_kb(*args: str, stdin: bytes = b"", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "kb", *args], input=stdin, capture_output=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_invalid_utf8_on_stdin_under_a_strict_utf8_locale(tree: Path) -> None:
    paste = b"garbage \xff\xfe\x80 line\nERROR 11-30 12:00:00 [core.py:1] ValueError: " + FILLED.encode() + b"\n\xc3("
    done = run_kb("explain", "--source", str(tree), "--json", stdin=paste,
                  env={"LC_ALL": "C.UTF-8", "PYTHONIOENCODING": "utf-8:strict", "PYTHONUTF8": "0"})
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert b"Traceback" not in done.stderr
    assert json.loads(done.stdout)["found"][0]["match"]["id"] == DCP


def test_a_dash_reads_standard_input(tree: Path) -> None:
    """`kb explain -` reads the paste from standard input, as `cat -` does, not the text "-"."""
    done = run_kb("explain", "--source", str(tree), "--json", "-", stdin=("ERROR ValueError: " + FILLED).encode())
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert json.loads(done.stdout)["found"][0]["match"]["id"] == DCP


def test_an_argument_that_is_not_utf8(tree: Path) -> None:
    argument = b"h\xc3\xa9ads \xff ".decode("utf-8", "surrogateescape") + FILLED  # as Python receives such bytes
    done = run_kb("explain", "--source", str(tree), "--json", argument,
                  env={"LC_ALL": "C.UTF-8", "PYTHONIOENCODING": "utf-8:strict", "PYTHONUTF8": "0"})
    assert b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    assert done.returncode == 0
    found = json.loads(done.stdout)["found"][0]
    assert found["match"]["id"] == DCP and found["message"].startswith("h\u00e9ads \ufffd The model's")


def test_an_output_that_cannot_encode_the_paste(tree: Path) -> None:
    done = run_kb("explain", "--source", str(tree), "--json", stdin=("h\u00e9ads \u2603 " + FILLED).encode(),
                  env={"PYTHONIOENCODING": "ascii:strict"})
    assert b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    assert done.returncode == 0
    found = json.loads(done.stdout)["found"][0]  # escaped as JSON escapes: still valid JSON
    assert found["match"]["id"] == DCP and found["message"].startswith("h\u00e9ads \u2603 The model's")


@pytest.mark.parametrize("content, problem", [
    ("[1, 2]", "not a match index: a JSON object is expected"),
    ('{"format": "kb-match/0", "entries": []}', "not a match index: its format is 'kb-match/0', not 'kb-match/1'"),
    ('{"format": "kb-match/1"}', "not a match index: 'entries' must be a list"),
    ('{"format": "kb-match/1", "entries": [7]}', "not a match index: entry 0: a JSON object is expected"),
    ('{"format": "kb-match/1", "entries": [{"id": "x"}]}', "not a match index: entry 0: 'title' is missing or not str"),
    ('{"format": "kb-match/1", "entries": [{"id": "x", "title": "t", "cls": "E", "file": "f", "line": true, '
     '"func": "g", "curated": false, "parts": ["a"], "names": [], "literal": 1, "matchable": true}]}',
     "not a match index: entry 0: 'line' is missing or not int"),
    ('{"format": "kb-match/1", "entries": [{"id": "x", "title": "t", "cls": "E", "file": "f", "line": 1, '
     '"func": "g", "curated": false, "parts": [], "names": [], "literal": 1, "matchable": true}]}',
     "not a match index: entry 0: 'parts' and 'names' must be lists of strings, 'parts' not empty"),
    ('{"format": "kb-match/1", "entries": [{"id": "x", "title": "t", "cls": "E", "file": "f", "line": 1, '
     '"func": "g", "curated": false, "parts": ["some text"], "names": [], "literal": 9, "matchable": true, '
     '"older": true}]}', "not a match index: entry 0: older wording without 'releases'"),
    ("[" * 100_000, "not a readable match index: nested too deeply"),
    ('{"format": "kb-match/1", "entries": [', "not a readable match index: Expecting value: line 1 column 38"),
])
def test_an_index_of_the_wrong_shape_is_a_located_error(capsys, tmp_path: Path, content: str, problem: str) -> None:
    index = tmp_path / "index.json"
    index.write_text(content)
    assert main(["explain", "--index", str(index), FILLED]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"Error: {index}: {problem}"), err
    assert "Traceback" not in err


def test_an_index_that_is_a_folder_or_a_fifo(capsys, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")  # reading it would wait for a writer forever
    (tmp_path / "folder").mkdir()
    for name in ("fifo", "folder"):
        assert main(["explain", "--index", str(tmp_path / name), FILLED]) == 1
        assert capsys.readouterr().err == f"Error: {tmp_path / name}: not a match index: not a regular file\n"


@pytest.mark.parametrize("damage", ["truncate", "wrong-shape", "folder", "empty"])
def test_a_damaged_cached_index_is_compiled_again(capsys, tree: Path, damage: str) -> None:
    from kb.paths import cache_dir

    assert main(["explain", "--source", str(tree), FILLED]) == 0
    capsys.readouterr()
    (cached,) = (cache_dir() / "match-index").iterdir()
    good = cached.read_bytes()
    if damage == "truncate":
        cached.write_bytes(good[: len(good) // 2])
    elif damage == "wrong-shape":
        cached.write_text('{"format": "kb-match/1", "entries": [{"id": 1}]}')
    elif damage == "folder":
        cached.unlink()
        (cached / "x").mkdir(parents=True)
    else:
        cached.write_bytes(b"")
    assert main(["explain", "--source", str(tree), "--json", FILLED]) == 0
    assert json.loads(capsys.readouterr().out)["found"][0]["match"]["id"] == DCP
    assert cached.read_bytes() == good  # rebuilt, so the next run reads it as it is
    assert main(["explain", "--source", str(tree), FILLED]) == 0


def test_a_paste_is_read_in_bounded_memory_keeping_its_end() -> None:
    lines = [f"INFO line {i}\n".encode() for i in range(20_000)] + [b"ValueError: " + FILLED.encode() + b"\n"]
    text, cut = read_paste(io.BytesIO(b"".join(lines)), limit=64 * 1024)
    assert cut == 64 * 1024 and len(text.encode()) <= 64 * 1024
    assert text.endswith(FILLED + "\n") and text.startswith("INFO line ")  # starts at a whole line
    text, cut = read_paste(io.BytesIO(b"short \xff paste"), limit=64 * 1024)
    assert (text, cut) == ("short \ufffd paste", 0)
