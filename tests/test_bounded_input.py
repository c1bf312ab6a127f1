"""Memory is bounded on the way in: a source file of tens or hundreds of megabytes (a folder, a
git object, a wheel member), a config.json and a pasted log. Each command runs in a process of
its own with an address-space limit (RLIMIT_AS), so that reading or parsing an input whole ends
the old code in MemoryError; the big inputs are made in tmp_path when the test runs."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import make_git_repo
from fixture_tree import tree_files, write_tree
from kb.checks.launch import MAX_CONFIG_BYTES
from kb.cli import main
from kb.explain.match import MAX_FOUND
from kb.explain.messages import MAX_MESSAGE
from kb.scan.source import MAX_SOURCE_BYTES, MAX_SOURCE_TOKENS, token_estimate

GIB = 2**30
DENSE_LINE = b"x = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, a.b, c(d), 'raise']\n"  # ~330 bytes of ast a byte
DCP = "d97d5d8528e2b364"
FILLED = ("The model's number of query heads per KV head (6) must be divisible by "
          "`--decode-context-parallel-size` (4) for GQA/MQA.")


def run_kb(cwd: Path, *argv: str, stdin: bytes | Path = b"", memory: int = 2 * GIB,
           timeout: int = 120) -> tuple[int, str, str]:
    """`kb ...` in a process of its own given `memory` bytes of address space and `timeout`
    seconds; its exit code, standard output and standard error."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    done = subprocess.run([sys.executable, "-m", "kb", *argv], input=stdin.read_bytes() if isinstance(stdin, Path) else stdin,
                          capture_output=True, timeout=timeout, cwd=cwd, preexec_fn=limit)
    return done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace")


def dense(size: int) -> bytes:
    """Valid Python of about `size` bytes whose syntax tree takes gigabytes (it says `raise`, so
    the scanner parses it)."""
    return DENSE_LINE * (size // len(DENSE_LINE))


def padded(path: Path, size: int) -> None:
    """A small raising function, then NUL bytes up to `size` (a sparse file: no disk is used)."""
    with open(path, "wb") as f:
        f.write(b"def g(x):\n    raise ValueError('padded')\n")
        f.truncate(size)


def over_bytes(path: str, size: int) -> str:
    return f"{path}:1: not scanned: {size:,} bytes, over the {MAX_SOURCE_BYTES // 2**20} MiB limit for a source file"


# --- the scanned tree ----------------------------------------------------------------------------
def test_huge_files_of_a_folder_are_located_warnings_not_memory_errors(tmp_path: Path) -> None:
    """50 MB of dense code (its syntax tree alone would take 16 GB) and a 400 MB padded file:
    each is a located warning, the rest of the tree is scanned, in 2 GiB."""
    tree = write_tree(tmp_path / "tree", tree_files("0.1.0", broken=False))
    big = dense(50 * 2**20)
    (tree / "vllm" / "big.py").write_bytes(big)
    padded(tree / "vllm" / "padded.py", 400 * 2**20)
    code, _out, err = run_kb(tmp_path, "scan", "--source", str(tree), "-o", str(tmp_path / "scan.json"))
    assert code == 0, err[-2000:]
    assert "Traceback" not in err and "MemoryError" not in err
    lines = err.splitlines()
    assert f"warning: {over_bytes('vllm/big.py', len(big))}" in lines
    assert f"warning: {over_bytes('vllm/padded.py', 400 * 2**20)}" in lines
    scan = json.loads((tmp_path / "scan.json").read_text())
    assert {s["file"] for s in scan["sites"]} == {"vllm/config/model.py", "vllm/decoding.py"}
    assert {"path": "vllm/big.py", "line": 1, "message": over_bytes("vllm/big.py", len(big)).split(": ", 1)[1]} \
        in scan["warnings"]


def test_a_dense_file_under_the_byte_limit_is_refused_by_its_words_and_signs(tmp_path: Path) -> None:
    """4 MB of `a, a, a, ...`: under the byte limit, but `ast` would take 3 GB for it."""
    tree = write_tree(tmp_path / "tree", tree_files("0.1.0", broken=False))
    data = b"raise_ = [" + b"a, " * (4 * 2**20 // 3) + b"]\n"
    (tree / "vllm" / "dense.py").write_bytes(data)
    assert len(data) < MAX_SOURCE_BYTES and token_estimate(data) > MAX_SOURCE_TOKENS
    code, _out, err = run_kb(tmp_path, "scan", "--source", str(tree), "-o", str(tmp_path / "scan.json"))
    assert code == 0, err[-2000:]
    assert (f"warning: vllm/dense.py:1: not scanned: about {token_estimate(data):,} words and signs, over the "
            f"{MAX_SOURCE_TOKENS:,} limit for a source file") in err.splitlines()


def test_a_huge_git_object_is_a_located_warning(tmp_path: Path) -> None:
    big = dense(50 * 2**20)
    make_git_repo(tmp_path / "repo", {"v0.1.0": tree_files("0.1.0", broken=False) | {"vllm/big.py": big.decode()}}).close()
    code, _out, err = run_kb(tmp_path, "scan", "--git", str(tmp_path / "repo"), "--ref", "v0.1.0", "--no-cache",
                  "-o", str(tmp_path / "scan.json"))
    assert code == 0, err[-2000:]
    assert f"warning: {over_bytes('vllm/big.py', len(big))}" in err.splitlines()
    assert len(json.loads((tmp_path / "scan.json").read_text())["sites"]) > 0


def test_a_huge_or_bomb_compressed_wheel_member_is_a_located_warning(tmp_path: Path) -> None:
    """A member of 50 MB (a few KB deflated), and one compressed with LZMA: neither is unpacked."""
    wheel = tmp_path / "vllm-0.1.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    big = dense(50 * 2**20)
    files = tree_files("0.1.0", broken=False)
    write_tree(tmp_path / "t", files)
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for rel in sorted(files):
            z.write(tmp_path / "t" / rel, rel)
        z.writestr("vllm/big.py", big)
        z.writestr(zipfile.ZipInfo("vllm/lzma.py"), b"raise ValueError('x')\n", compress_type=zipfile.ZIP_LZMA)
    code, _out, err = run_kb(tmp_path, "scan", "--wheel", str(wheel), "--no-cache", "-o", str(tmp_path / "scan.json"))
    assert code == 0, err[-2000:]
    lines = err.splitlines()
    assert f"warning: {over_bytes('vllm/big.py', len(big))}" in lines
    assert ("warning: vllm/lzma.py:1: not scanned: compressed with zip method 14 (a wheel's members are stored or "
            "deflated)") in lines


def test_build_names_the_skipped_file_and_builds_the_rest(tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "tree", tree_files("0.1.0", broken=False))
    (tree / "vllm" / "big.py").write_bytes(dense(50 * 2**20))
    code, _out, err = run_kb(tmp_path, "build", "--source", str(tree), "-o", str(tmp_path / "site"))
    assert code == 0, err[-2000:]
    assert f"warning: {over_bytes('vllm/big.py', len(dense(50 * 2**20)))}" in err.splitlines()
    assert (tmp_path / "site" / "errors" / DCP / "index.html").is_file()


def test_token_estimate_counts_signs_and_the_spaces_between_words() -> None:
    assert token_estimate(b"") == 0
    assert token_estimate(b"x = [1, 2]\n") == 8  # = [ , ] and four runs of white space
    assert token_estimate(b"not not not a") == 3
    assert token_estimate("é = 'ü'".encode()) == 5  # = ' ' and two runs of white space: é and ü are letters


# --- config.json ---------------------------------------------------------------------------------
def test_a_config_json_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """40 MB of `[[], [], ...]` takes 1.1 GB once parsed (the old limit was 64 MB): refused by
    its size, in 1 GiB (exit 2)."""
    config = tmp_path / "config.json"
    config.write_bytes(b"[" + b"[]," * (40 * 2**20 // 3) + b"[]]")
    for command in ("check", "fit"):
        extra = ["--gpu-memory-gib", "80"] if command == "fit" else []
        code, _out, err = run_kb(tmp_path, command, "--model-config", str(config), *extra, "--", "vllm", "serve", "m",
                                 memory=GIB)
        assert code == 2, err[-2000:]
        assert err.splitlines()[-1] == (f"Error: {config}: not a config.json: larger than "
                                        f"{MAX_CONFIG_BYTES // 2**20} MB")


# --- kb explain ----------------------------------------------------------------------------------
@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "tree", tree_files("0.1.0", broken=False))


def test_twenty_megabytes_of_dots_in_bounded_memory(tmp_path: Path, tree: Path) -> None:
    """The old matcher made a tuple of every sign of the message: 4 GB for these 20 MB."""
    paste = tmp_path / "dots.txt"
    paste.write_bytes(b"." * (20 * 2**20))
    code, out, err = run_kb(tmp_path, "explain", "--source", str(tree), stdin=paste, memory=int(1.5 * GIB))
    assert code == 1, err[-2000:]
    assert out == ("No known vLLM error matches this text.\n\nNote: 1 line(s) or message(s) longer than "
                   f"{MAX_MESSAGE:,} characters were read up to that length (the first at line 1)\n")
    assert "Traceback" not in err


def test_a_log_over_the_limit_is_read_from_its_end_and_the_output_says_so(tmp_path: Path, tree: Path) -> None:
    """80 MB of NUL bytes, then the error: the last 64 MB are read, the error is found, and the
    answer (text and JSON) says the input was cut."""
    paste = tmp_path / "nul.txt"
    with open(paste, "wb") as f:
        f.write(b"\0" * (80 * 2**20) + b"\nERROR 11-30 12:00:00 [core.py:1] ValueError: " + FILLED.encode() + b"\n")
    note = "the input is larger than 64 MB: only its last 64 MB were read"
    code, out, err = run_kb(tmp_path, "explain", "--source", str(tree), stdin=paste, memory=int(1.5 * GIB))
    assert code == 0, err[-2000:]
    assert out.splitlines()[2].startswith(DCP) and out.splitlines()[-1] == f"Note: {note}"
    assert f"warning: {note.replace('were', 'are')}" in err.splitlines()
    code, out, err = run_kb(tmp_path, "explain", "--source", str(tree), "--json", stdin=paste, memory=int(1.5 * GIB))
    assert code == 0, err[-2000:]
    answer = json.loads(out)
    assert answer["found"][0]["match"]["id"] == DCP and answer["notes"] == [note]


@pytest.mark.parametrize("paste", [
    "\\" * 2**21,  # a run of backslashes: each was tried as the start of an escaped quote
    "Error[" * (2**21 // 6),  # each `Error[` looked for its `]` to the end of the line
    'File "' + "/vllm/a" * (2**21 // 7),  # each `/vllm/` of one path looked for `.py"` to its end
    "a." * 2**22,  # a dotted name of four million parts: the regex kept a frame for each
], ids=["backslashes", "brackets", "traceback-path", "dotted-name"])
def test_hostile_punctuation_in_bounded_time_and_memory(tmp_path: Path, tree: Path, paste: str) -> None:
    code, out, err = run_kb(tmp_path, "explain", "--source", str(tree), stdin=paste.encode(), memory=int(1.5 * GIB))
    assert code == 1, err[-2000:]
    assert out.startswith("No known vLLM error matches this text.") and "Traceback" not in err


def test_a_log_of_many_distinct_errors_lists_at_most_max_found(capsys: pytest.CaptureFixture[str], tree: Path) -> None:
    lines = [FILLED.replace("(6)", f"({i})") for i in range(MAX_FOUND + 500)]
    text = "".join(f"ERROR 11-30 12:00:00 [core.py:1] ValueError: {line}\n" for line in lines)
    assert main(["explain", "--source", str(tree), "--json", text]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert len(answer["found"]) == MAX_FOUND
    assert answer["notes"] == [f"500 more message(s) of other errors are not listed: at most {MAX_FOUND:,} distinct "
                               "errors (an id with its values) are"]


def test_a_line_longer_than_the_message_limit_is_read_up_to_it_and_the_output_says_so(
        capsys: pytest.CaptureFixture[str], tree: Path) -> None:
    """The error, then three million characters on the same line (a log line of a JSON dump)."""
    paste = "INFO 11-30 12:00:00 [x.py:1] started\nValueError: " + FILLED + " " + "x" * 3 * MAX_MESSAGE + "\n"
    assert main(["explain", "--source", str(tree), "--json", paste]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["found"][0]["match"]["id"] == DCP
    assert answer["notes"] == [f"1 line(s) or message(s) longer than {MAX_MESSAGE:,} characters were read up to "
                               "that length (the first at line 2)"]
