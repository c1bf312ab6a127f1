from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from fixture_tree import tree_files, write_tree
from kb.cli import main

SCHEMA = json.loads((Path(__file__).parent.parent / "kb/schemas/scan.schema.json").read_text())


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "tree", tree_files("0.1.0", broken=False))


def test_scan_writes_valid_json(capsys, tree: Path, tmp_path: Path) -> None:
    out_file = tmp_path / "out" / "scan.json"
    code, out, err = run(capsys, "scan", "--source", str(tree), "-o", str(out_file), "--jobs", "1")
    assert code == 0 and out == ""
    assert err.endswith(f"-> {out_file}\n") and err.startswith("7 sites, 7 ids in 6 files (1 vendored files excluded")
    doc = json.loads(out_file.read_text())
    jsonschema.validate(doc, SCHEMA)
    assert doc["counts"]["sites"] == 7 and doc["release"] == "0.1.0"
    assert oct(out_file.stat().st_mode & 0o777) != oct(0o600)  # a normal file, not a private temp file


def test_scan_to_stdout_and_exceptions_option(capsys, tree: Path) -> None:
    code, out, _ = run(capsys, "scan", "--source", str(tree), "--exceptions", "all", "--include-vendored")
    doc = json.loads(out)
    assert code == 0 and doc["exceptions"] == ["all"]
    assert "NotAValueError" in {s["exception_class"] for s in doc["sites"]}


@pytest.mark.parametrize(
    "argv, line, code",
    [
        (["--source", "{tmp}/missing"], "Error: {tmp}/missing: not a folder", 1),
        (["--source", "{tmp}"], "Error: {tmp}: not a vLLM source tree (no vllm/ package folder)", 1),
        (["--git", "{tmp}/missing", "--ref", "v1"], "Error: {tmp}/missing: no such repository", 1),
        (["--git", "{tmp}/tree"], "Error: --git needs --ref (a tag, branch or commit)", 2),
        (["--ref", "v1"], "Error: --ref goes with --git", 2),
        (["--wheel", "{tmp}/bad.whl"], "Error: {tmp}/bad.whl: not a valid wheel (zip): File is not a zip file", 1),
        (["--source", "{tmp}/tree", "--exceptions", ","], "Error: --exceptions needs at least one class name, or 'all'", 2),
        (["--vllm-version", "99.0.0"],
         "Error: could not download vllm==99.0.0 from the package index: No matching distribution found for vllm==99.0.0", 1),
        (["--source", "{tmp}/tree", "--exceptions", "NoSuchError"],
         "Error: no raise of NoSuchError found in 6 files: is this a vLLM tree?", 1),
    ],
)
def test_bad_input_gives_one_error_line(capsys, tree: Path, tmp_path: Path, argv: list[str], line: str, code: int) -> None:
    (tmp_path / "bad.whl").write_bytes(b"garbage")
    target = tmp_path / "keep.json"
    target.write_text("previous\n")
    got, out, err = run(capsys, "scan", *[a.format(tmp=tmp_path) for a in argv], "-o", str(target))
    assert got == code
    assert err.splitlines()[-1] == line.format(tmp=tmp_path)
    assert target.read_text() == "previous\n"  # nothing half-written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.whl", "keep.json", "tree"]


def test_missing_git_ref(capsys, tmp_path: Path) -> None:
    from conftest import make_git_repo

    repo = tmp_path / "repo"
    make_git_repo(repo, {"v0.1.0": tree_files("0.1.0")}).close()
    code, _, err = run(capsys, "scan", "--git", str(repo), "--ref", "v9.9.9")
    assert code == 1 and err.splitlines()[-1] == f"Error: ref 'v9.9.9' not found in {repo}"
    code, out, _ = run(capsys, "scan", "--git", repo.as_uri(), "--ref", "v0.1.0", "--quiet")
    assert code == 0 and json.loads(out)["source"]["kind"] == "git"


def test_strict(capsys, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", tree_files("0.1.0", broken=True))
    code, _, err = run(capsys, "scan", "--source", str(root), "-o", str(tmp_path / "x.json"))
    assert code == 0 and "warning: vllm/broken.py:1: cannot parse: invalid syntax" in err
    code, _, err = run(capsys, "scan", "--source", str(root), "--strict", "-o", str(tmp_path / "y.json"))
    assert code == 1
    assert err.splitlines()[-1] == "Error: 1 file(s) could not be parsed (--strict); first: vllm/broken.py:1: cannot parse: invalid syntax"
    assert not (tmp_path / "y.json").exists()


def test_python_dash_m_and_console_script(tree: Path, tmp_path: Path) -> None:
    env = {**os.environ, "KB_CACHE_DIR": str(tmp_path / "cache")}
    a = subprocess.run([sys.executable, "-m", "kb", "scan", "--source", str(tree), "--quiet"], capture_output=True,
                       text=True, env=env, cwd=tmp_path)
    assert a.returncode == 0, a.stderr
    assert json.loads(a.stdout)["counts"]["sites"] == 7
    b = subprocess.run([sys.executable, "-m", "kb", "scan", "--source", str(tree), "--quiet", "--no-cache"],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert b.stdout == a.stdout  # byte-identical on rerun, with or without the cache


@pytest.mark.parametrize("kind", ["fifo", "symlink", "folder", "link-to-device"])
def test_output_that_is_not_a_regular_file_is_refused_never_renamed_over(capsys, tree: Path, tmp_path: Path,
                                                                          kind: str) -> None:
    import os

    target = tmp_path / "target"
    victim = tmp_path / "victim.txt"
    victim.write_text("KEEP")
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "symlink":
        target.symlink_to(victim)
    elif kind == "folder":
        target.mkdir()
    else:
        target.symlink_to("/dev/null")
    code, out, err = run(capsys, "scan", "--source", str(tree), "-o", str(target), "--jobs", "1")
    assert code == 1 and out == ""
    assert err.startswith(f"Error: {target}: a ") and "kb writes only a regular file here" in err
    assert "Traceback" not in err
    assert victim.read_text() == "KEEP"
    assert os.path.lexists(target) and not target.is_file() or kind == "symlink"  # still what it was
    assert (target.is_symlink() if kind in ("symlink", "link-to-device") else not target.is_symlink())
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".target.")] == []  # no temporary file left


def test_a_build_into_a_symbolic_link_is_refused(capsys, tree: Path, tmp_path: Path) -> None:
    real = tmp_path / "real-site"
    real.mkdir()
    (real / "keep.txt").write_text("KEEP")
    link = tmp_path / "site"
    link.symlink_to(real)
    code, _, err = run(capsys, "build", "--source", str(tree), "-o", str(link), "--jobs", "1")
    assert code == 1 and "a symbolic link" in err and "Traceback" not in err
    assert link.is_symlink() and (real / "keep.txt").read_text() == "KEEP"


SITE_URL_COMMANDS = [["build", "-o", "{tmp}/site"], ["check", "--", "vllm", "serve", "m"], ["explain", "some error"],
                     ["search", "lora"], ["fit", "--model-config", "{tmp}/c.json", "--", "vllm", "serve", "m"]]


@pytest.mark.parametrize("url, why", [
    ("javascript:alert(1)", "must be an http:// or https:// URL with a host, e.g. https://errors.example.org"),
    ("data:text/html,x", "must be an http:// or https:// URL with a host, e.g. https://errors.example.org"),
    ("VBScript:msgbox(1)", "must be an http:// or https:// URL with a host, e.g. https://errors.example.org"),
    ("ftp://x.example", "must be an http:// or https:// URL with a host, e.g. https://errors.example.org"),
    ("/kb", "must be an http:// or https:// URL with a host, e.g. https://errors.example.org"),
    ("https://", "must be an http:// or https:// URL with a host, e.g. https://errors.example.org"),
    ("https://x.example/a b", 'a URL has no spaces, control characters or any of < > " ` { } | \\ ^'),
    ("https://x.example/\u202e", 'a URL has no spaces, control characters or any of < > " ` { } | \\ ^'),
    ("https://x.example/\x1b[31m", 'a URL has no spaces, control characters or any of < > " ` { } | \\ ^'),
    ('https://x.example/"><script>', 'a URL has no spaces, control characters or any of < > " ` { } | \\ ^'),
    ("https://x.example/?q=1", "must have no query or fragment: the pages' paths are added to its end"),
    ("https://x.example:99999/", "not a URL: Port out of range 0-65535"),
])
@pytest.mark.parametrize("command", SITE_URL_COMMANDS, ids=lambda c: c[0])
def test_site_url_must_be_an_http_url(capsys, tree: Path, tmp_path: Path, command: list[str], url: str,
                                      why: str) -> None:
    argv = [a.format(tmp=tmp_path) for a in command]
    at = argv.index("--") if "--" in argv else len(argv)
    code, out, err = run(capsys, *argv[:at], "--source", str(tree), "--site-url", url, *argv[at:])
    assert code == 2 and out == ""
    assert err.splitlines()[-1] == f"Error: --site-url: {why} (got {url!r})"  # repr: no raw control character
    assert not (tmp_path / "site").exists()


def test_site_url_is_the_base_of_printed_links(capsys, tree: Path) -> None:
    code, out, _ = run(capsys, "search", "--source", str(tree), "--json", "--site-url", "HTTPS://x.example/kb/",
                       "divisible")
    assert code == 0
    assert all(h["url"] == f"HTTPS://x.example/kb/0.1.0/errors/{h['id']}/" for h in json.loads(out)["results"])


def test_build_options_refuse_a_site_url_that_is_not_http(tmp_path: Path) -> None:
    from kb.errors import UsageError
    from kb.site.build import BuildOptions

    with pytest.raises(UsageError, match=r"^--site-url: must be an http:// or https:// URL"):
        BuildOptions(tmp_path / "site", site_url="javascript:alert(1)")
    assert BuildOptions(tmp_path / "site", site_url="https://x.example/").site_url == "https://x.example/"
