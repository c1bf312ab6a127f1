"""Hostile curated YAML: every file gets a located problem in bounded time and memory, never a
traceback, and `--keep-going` skips it."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from entryhelpers import DCP_ENTRY, DCP_ID, write_entries
from fixture_tree import tree_files, write_tree
from kb.cli import main
from kb.entries.load import load_entries

HEAD = "id: 0123456789abcdef\nmeaning: x\n"
LAUGHS = "".join(f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi"))
LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + LAUGHS
HOSTILE = {
    "laughs.yaml": (LAUGHS, "errors/laughs.yaml:2: alias *a is not allowed in curated entries (write the value out)"),
    "bigint.yaml": (HEAD + "solutions: [" + "9" * 5000 + "]\n",
                    "errors/bigint.yaml:3: number too long (5000 characters; at most 100): quote it if it is text"),
    "pyname.yaml": ("id: 0123456789abcdef\nmeaning: !!python/name:os.system x\n",
                    "errors/pyname.yaml:2: tag !!python/name:os.system is not allowed in curated entries"),
    "pyobject.yaml": (HEAD + "trigger: !!python/object/apply:os.system [echo hi]\n",
                      "errors/pyobject.yaml:3: tag !!python/object/apply:os.system is not allowed in curated entries"),
    "recursive.yaml": (HEAD + "solutions: &m [*m]\n",
                       "errors/recursive.yaml:3: alias *m is not allowed in curated entries (write the value out)"),
    "flowdeep.yaml": (HEAD + "solutions: " + "[" * 100_000 + "]" * 100_000 + "\n",
                      "errors/flowdeep.yaml:3: nested more than 20 levels deep"),
    "blockdeep.yaml": (HEAD + "trigger:\n" + "".join(" " * i + "a:\n" for i in range(1, 1000)),
                       "errors/blockdeep.yaml:23: nested more than 20 levels deep"),
    "base60.yaml": (HEAD + "trigger: 1" + ":1" * 100_000 + "\n",
                    "errors/base60.yaml:3: number too long (200001 characters; at most 100): quote it if it is text"),
    "inf.yaml": (HEAD + "trigger: [1.0e+400]\n", "errors/inf.yaml:3: '1.0e+400' is not a finite number"),
    "binary.yaml": (HEAD + "trigger: !!binary aGk=\n", "errors/binary.yaml:3: tag !!binary is not allowed in curated entries"),
    "twodocs.yaml": (HEAD + "---\n" + HEAD, "errors/twodocs.yaml:3: more than one YAML document (---) in one entry"),
    "complexkey.yaml": (HEAD + "? [a, b]\n: c\n", "errors/complexkey.yaml:3: a key must be a plain name, not a list or a mapping"),
    "nul.yaml": (HEAD + "trigger: a\x00b\n", "errors/nul.yaml:3: not valid YAML: character U+0000 is not allowed"),
    "huge.yaml": (HEAD + "trigger: '" + "a" * (1 << 20) + "'\n", "errors/huge.yaml:1: cannot read: larger than 1024 KiB"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_yaml_is_one_located_problem(tmp_path: Path, name: str) -> None:
    text, expected = HOSTILE[name]
    folder = write_entries(tmp_path / "errors", {name: text})
    loaded = load_entries(folder)
    assert [str(p) for p in loaded.problems] == [expected] and loaded.entries == ()


def test_not_utf8_and_not_a_file(tmp_path: Path) -> None:
    folder = tmp_path / "errors"
    folder.mkdir()
    (folder / "latin1.yaml").write_bytes(HEAD.encode() + b"trigger: caf\xe9\n")
    os.mkfifo(folder / "fifo.yaml")  # reading it would block for ever
    (folder / "dir.yaml").mkdir()
    assert [str(p) for p in load_entries(folder).problems] == [
        "errors/dir.yaml:1: cannot read: not a regular file",
        "errors/fifo.yaml:1: cannot read: not a regular file",
        "errors/latin1.yaml:3: cannot read: not UTF-8 (invalid continuation byte)",
    ]


def test_dates_stay_text_and_core_tags_are_read(tmp_path: Path) -> None:
    folder = write_entries(tmp_path / "errors", {"ok.yaml": f"id: {DCP_ID}\nmeaning: !!str 2024-01-01\n"
                                                           "trigger: 2024-13-45\n"})
    loaded = load_entries(folder)
    assert loaded.problems == () and (loaded.entries[0].meaning, loaded.entries[0].trigger) == ("2024-01-01", "2024-13-45")


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def test_billion_laughs_in_bounded_time_and_memory(tmp_path: Path) -> None:
    """Expanded, the document holds 9**9 strings: far beyond the 2 GiB the loader gets here."""
    folder = write_entries(tmp_path / "errors", {"laughs.yaml": LAUGHS + "id: 0123456789abcdef\nmeaning: x\n"})
    code = textwrap.dedent(f"""
        from pathlib import Path
        from kb.entries.load import load_entries
        print(*load_entries(Path({str(folder)!r})).problems, sep="\\n")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          preexec_fn=_limit_memory)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "errors/laughs.yaml:2: alias *a is not allowed in curated entries (write the value out)\n"


def test_build_names_every_hostile_file_and_keep_going_skips_them(capsys, tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "tree", tree_files("0.1.0", broken=False))
    hostile = {name: text for name, (text, _) in HOSTILE.items() if name != "huge.yaml"}
    entries = write_entries(tmp_path / "errors", {"dcp.yaml": DCP_ENTRY} | hostile)
    out = tmp_path / "site"
    argv = ["build", "--source", str(tree), "--errors", str(entries), "-o", str(out), "--quiet", "--jobs", "1"]
    assert main(argv) == 1
    err = capsys.readouterr().err.splitlines()
    expected = [HOSTILE[name][1] for name in sorted(hostile)]
    assert err == [*expected, f"Error: {len(expected)} problem(s) in curated entries (--keep-going skips the malformed ones)"]
    assert not out.exists()
    assert main([*argv, "--keep-going"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if "skipped" in line] == [f"warning: skipped: {line}" for line in expected]
    assert "Traceback" not in "\n".join(err)
    assert (out / f"errors/{DCP_ID}/index.html").is_file()


IMG = "<img src=x onerror=alert(1)>"
MARKDOWN = {
    "escaped backtick": (f"meaning: '\\`{IMG}\\`'",
                         f"errors/bad.yaml:2: raw HTML in markdown (meaning): {IMG} (use backticks or plain text)"),
    "raw block": ("trigger: \"<div>\\n\\nx\\n</div>\"",
                  "errors/bad.yaml:3: raw HTML in markdown (trigger): <div> (use backticks or plain text)"),
    "comment": ("solutions: ['a <!-- hidden --> b']",
                "errors/bad.yaml:3: raw HTML in markdown (solutions.0): <!-- hidden --> (use backticks or plain text)"),
    "script link": ("solutions: ['[x](javascript:alert(1))']",
                    "errors/bad.yaml:3: unsafe link in markdown (solutions.0): 'javascript:alert(1)' (only http(s)://, "
                    "paths and #anchors)"),
    "mixed-case link": ("prevention: ['[x](  JaVaScRiPt:alert(1))']",
                        "errors/bad.yaml:3: unsafe link in markdown (prevention.0): 'JaVaScRiPt:alert(1)' (only "
                        "http(s)://, paths and #anchors)"),
    "data link": ("common_situations: [{text: '[d](data:text/html;base64,PHNjcmlwdD4=)'}]",
                  "errors/bad.yaml:3: unsafe link in markdown (common_situations.0.text): "
                  "'data:text/html;base64,PHNjcmlwdD4=' (only http(s)://, paths and #anchors)"),
    "external image": ("trigger: '![t](https://example.invalid/t.png)'",
                       "errors/bad.yaml:3: image in markdown (trigger): 'https://example.invalid/t.png' (pages make no "
                       "external requests; entries ship no images)"),
    "deep list": ("trigger: '" + "1. " * 1600 + "x'",
                  "errors/bad.yaml:3: trigger nests lists or quotes too deeply (more than 20 elements)"),
    "deep quote": ("trigger: '" + "> " * 2400 + "x'",
                   "errors/bad.yaml:3: trigger nests lists or quotes too deeply (more than 20 elements)"),
    "brackets": ("trigger: '" + "[" * 4000 + "'", "errors/bad.yaml:3: trigger has more than 100 [ brackets"),
    "long": ("trigger: '" + "a" * 5001 + "'", "errors/bad.yaml:3: trigger is longer than 5000 characters"),
    "much prose": ("solutions: [" + ", ".join(["a" * 5000] * 11) + "]",
                   "errors/bad.yaml:1: more than 50000 characters of markdown in one entry (55001)"),
}


@pytest.mark.parametrize("name", sorted(MARKDOWN))
def test_markdown_a_renderer_would_pass_through_is_refused(tmp_path: Path, name: str) -> None:
    field, expected = MARKDOWN[name]
    head = "id: 0123456789abcdef\n" + ("" if field.startswith("meaning") else "meaning: x\n")
    folder = write_entries(tmp_path / "errors", {"bad.yaml": head + field + "\n"})
    assert [str(p) for p in load_entries(folder).problems] == [expected]


def test_code_spans_and_fences_may_hold_html(tmp_path: Path) -> None:
    text = f"meaning: |\n  In code: `{IMG}` and ``a ` {IMG}``\n\n  ```\n  <div>\n  ```\ntrigger: '    <img> indented code'\n"
    folder = write_entries(tmp_path / "errors", {"ok.yaml": f"id: {DCP_ID}\n" + text})
    assert load_entries(folder).problems == ()


def test_kb_new_keeps_a_hostile_file_name_in_its_comment(capsys, tmp_path: Path) -> None:
    from kb.scan.ids import error_id

    file = "vllm/x: id: 0000000000000000 #.py"  # (a name with a newline is not scanned at all)
    tree = write_tree(tmp_path / "tree", tree_files("0.1.0", broken=False) | {file: 'def f():\n    raise ValueError("m")\n'})
    folder = tmp_path / "new"
    folder.mkdir()
    assert main(["new", error_id("m", file), "--source", str(tree), "--errors", str(folder)]) == 0
    (path,) = folder.glob("*.yaml")
    lines = path.read_text().splitlines()
    assert lines[0] == "# Written by `kb new` from vLLM 0.1.0: vllm/x: id: 0000000000000000 #.py:2 in f."
    assert lines[1].startswith("# Complete every TODO") and not lines[2].startswith("#")
