"""Hostile input from the scanned source and from curated checks: a located warning or
problem, bounded time and memory, and nothing written outside the output and cache folders."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from entryhelpers import DCP_ENTRY, DCP_ID, DCP_MAX, DCP_MAX_ENTRY, DCP_MAX_FILE, DCP_MAX_ID, write_entries
from fixture_tree import MODEL_V1, tree_files, write_tree
from kb.cli import main

DCP_TEST = "if num_q_per_kv % decode_context_parallel_size != 0:"


@pytest.fixture
def time_guard() -> Iterator[None]:
    """Fails the test instead of hanging the run, should the command not come back in 60 s."""

    def expired(*_: object) -> None:
        raise TimeoutError("did not come back within 60 s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def fixture_tree(root: Path, model: str = MODEL_V1, extra: dict[str, str] | None = None) -> Path:
    files = tree_files("0.1.0", broken=False) | {"vllm/config/model.py": model, DCP_MAX_FILE: DCP_MAX} | (extra or {})
    return write_tree(root, files)


def kb_subprocess(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`kb ...` in a process of its own, given 60 s (hostile input once hung in C code)."""
    return subprocess.run([sys.executable, "-m", "kb", *argv], capture_output=True, text=True, timeout=60, cwd=cwd)


def lint_out(capsys: pytest.CaptureFixture[str], tree: Path, errors: Path) -> tuple[int, list[str], str]:
    code = main(["lint", "--source", str(tree), "--errors", str(errors)])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


# --- the evaluator, reached from curated checks and from vLLM's scanned guard ------------------------
def test_a_guard_from_the_source_cannot_hang_the_cross_validation(tmp_path: Path) -> None:
    """The shipped entry's template and file, with a guard that would compute a number of
    billions of digits: a located problem of that entry, in bounded time (a process of its
    own with a timeout: the old hang was in C, where no alarm interrupts it)."""
    model = MODEL_V1.replace(DCP_TEST, DCP_TEST[:-1] + " and ((((9**64)**64)**64)**64)**64 > 0:")
    tree = fixture_tree(tmp_path / "tree", model)
    errors = write_entries(tmp_path / "errors", {"dcp.yaml": DCP_ENTRY, "dcp-max.yaml": DCP_MAX_ENTRY})
    lint = kb_subprocess(tmp_path, "lint", "--source", str(tree), "--errors", str(errors))
    build = kb_subprocess(tmp_path, "build", "--source", str(tree), "--errors", str(errors), "-o", "site", "--quiet")
    assert build.returncode == 0 and "Traceback" not in build.stderr
    assert (tmp_path / "site" / f"errors/{DCP_ID}/index.html").is_file()
    out = lint.stdout.splitlines()
    assert lint.returncode == 1 and "Traceback" not in lint.stderr
    guard = ("decode_context_parallel_size > 1 and not self.use_mla and num_q_per_kv % decode_context_parallel_size "
             "!= 0 and ((((9 ** 64) ** 64) ** 64) ** 64) ** 64 > 0")
    assert out[1:] == [
        f"errors/dcp.yaml:14: vLLM's guard `{guard}` cannot be evaluated (exponent too large in '(9 ** 64) ** 64' (the "
        "result would have more than 4096 bits)): bind it in source_bindings, or set source_check: manual with a reason",
    ]
    assert out[0].startswith("errors/dcp.yaml:25: stale: guard changed since 0.1.0") and out[0].endswith(f"has `{guard}`")


def test_a_check_that_fails_to_evaluate_is_a_located_problem_of_its_entry(tmp_path: Path, capsys) -> None:
    """`1 // 0` no longer aborts `kb lint` with an unlocated error: every other entry's
    problems are still reported."""
    tree = fixture_tree(tmp_path / "tree")
    bad = DCP_ENTRY.replace('raises_when: "decode', 'raises_when: "1 // 0 == 0 and decode')
    wrong_case = DCP_MAX_ENTRY.replace("decode_context_parallel_size: 2}, raises: false",
                                       "decode_context_parallel_size: 2}, raises: true")
    errors = write_entries(tmp_path / "errors", {"dcp.yaml": bad, "dcp-max.yaml": wrong_case})
    code, out, err = lint_out(capsys, tree, errors)
    assert code == 1
    division = "ZeroDivisionError: integer division or modulo by zero in '1 // 0 == 0 and decode_context_parallel_size"
    assert [line.split(division)[0] for line in out] == [
        "errors/dcp-max.yaml:22: case says raises: true, but raises_when gives false",
        "errors/dcp-max.yaml:22: vLLM's own guard gives false for this case, the case says true",
        "errors/dcp.yaml:16: raises_when fails on the example fix of errors/dcp-max.yaml: ",
        "errors/dcp.yaml:23: raises_when fails on this case: ",
        "errors/dcp.yaml:24: raises_when fails on this case: ",
        "errors/dcp.yaml:11: example_fix.before: raises_when fails: ",
        "errors/dcp.yaml:12: example_fix.after: raises_when fails: ",
    ]
    assert all(division in line for line in out if "fails" in line)
    assert "Error:" not in err and err.endswith(": 7 problem(s)\n")


def test_kb_check_lists_a_check_that_fails_and_runs_the_others(tmp_path: Path, capsys) -> None:
    tree = fixture_tree(tmp_path / "tree")
    bad = DCP_ENTRY.replace('raises_when: "decode', 'raises_when: "1 // 0 == 0 and decode')
    errors = write_entries(tmp_path / "errors", {"dcp.yaml": bad, "dcp-max.yaml": DCP_MAX_ENTRY})
    (tmp_path / "config.json").write_text('{"num_attention_heads": 48, "num_key_value_heads": 8}')
    argv = ["check", "--source", str(tree), "--errors", str(errors), "--model-config", str(tmp_path / "config.json"),
            "--", "vllm", "serve", "m", "-tp", "16", "-dcp", "3"]
    assert main(argv) == 2  # an error is predicted, but the answer is incomplete
    out = capsys.readouterr().out
    assert out.startswith("1 error predicted for this launch:") and DCP_MAX_ID in out
    assert (f"1 check(s) not run:\n  {DCP_ID}: its condition fails on these values: ZeroDivisionError: "
            "integer division or modulo by zero in '1 // 0 == 0 and decode_context_parallel_size") in out


def test_a_non_finite_constant_is_located_in_lint_and_skipped_by_keep_going(tmp_path: Path, capsys) -> None:
    tree = fixture_tree(tmp_path / "tree")
    bad = DCP_ENTRY.replace('raises_when: "decode', 'raises_when: "1e999 > 0 and decode')
    errors = write_entries(tmp_path / "errors", {"dcp.yaml": bad, "dcp-max.yaml": DCP_MAX_ENTRY})
    code, out, _ = lint_out(capsys, tree, errors)
    assert (code, out) == (1, ["errors/dcp.yaml:16: raises_when: not a finite number: 1e309"])
    site = tmp_path / "site"
    assert main(["build", "--source", str(tree), "--errors", str(errors), "-o", str(site), "--quiet"]) == 1
    assert capsys.readouterr().err.splitlines()[0] == "errors/dcp.yaml:16: raises_when: not a finite number: 1e309"
    assert main(["build", "--source", str(tree), "--errors", str(errors), "-o", str(site), "--quiet",
                 "--keep-going"]) == 0
    assert "warning: skipped: errors/dcp.yaml:16: raises_when: not a finite number: 1e309" in capsys.readouterr().err
    assert (site / f"errors/{DCP_ID}/index.html").is_file()


@pytest.mark.parametrize("expr, message", [
    ("len('a' * 10**9) > 0", "value too large in \"'a' * 10 ** 9\""),
    ("len('%0*d' % (10**9, 1)) > 0", "string formatting with `%` is not allowed"),
    ("'%.4000f' % 1e308 != ''", "string formatting with `%` is not allowed: \"'%.4000f' % 1e+308\""),
    (" + ".join(["1"] * 500) + " > 0", "expression nested too deeply (more than 100 levels)"),
    (" + ".join(["1"] * 2000) + " > 0", "expression nested too deeply (more than 100 levels)"),
])
def test_huge_or_deep_checks_are_refused_by_lint_and_build_alike(tmp_path: Path, capsys, time_guard: None,
                                                                 expr: str, message: str) -> None:
    tree = fixture_tree(tmp_path / "tree")
    bad = DCP_ENTRY.replace('raises_when: "decode', f'raises_when: "{expr} and decode')
    errors = write_entries(tmp_path / "errors", {"dcp.yaml": bad, "dcp-max.yaml": DCP_MAX_ENTRY})
    code, out, _ = lint_out(capsys, tree, errors)
    assert code == 1 and out and all(line.startswith("errors/dcp.yaml:") and message in line for line in out)
    site = tmp_path / "site"
    code = main(["build", "--source", str(tree), "--errors", str(errors), "-o", str(site), "--quiet", "--keep-going"])
    err = capsys.readouterr().err
    assert code == 0 and "Traceback" not in err and "Error:" not in err
    assert (site / f"errors/{DCP_ID}/index.html").is_file()


# --- scanned source that once broke the whole scan ----------------------------------------------------
TERMS = 400  # about 330 `+` terms were enough for a RecursionError
PLUS = " + ".join(f"str(a{i})" for i in range(TERMS))
DEEP = {
    "message": f"def f(a):\n    raise ValueError({PLUS})\n",
    "guard": f"def f(a):\n    if {PLUS}:\n        raise ValueError('guarded')\n",
    "msg += chain": "def f(a):\n    msg = 'x'\n" + "".join(f"    msg += 'p{i}'\n" for i in range(TERMS))
                    + "    raise ValueError(msg)\n",
    "msg = msg + chain": "def f(a):\n    msg = 'x'\n" + "".join(f"    msg = msg + 'p{i}'\n" for i in range(TERMS))
                         + "    raise ValueError(msg)\n",
    "for head": f"def f(a):\n    for x in {PLUS}:\n        raise ValueError('in a loop')\n",
    "local": f"def f(a):\n    loc = {PLUS}\n    if loc:\n        raise ValueError('local')\n",
    "except head": "def f(a):\n    try:\n        pass\n    except " + " | ".join(["E"] * TERMS)
                   + ":\n        raise ValueError('handler')\n",
}
BIG = "'" + "a" * 200_000 + "'"  # text that would be copied into every output of every site that shows it
LONG = {
    "message": f"def f(a):\n    raise ValueError({BIG})\n",
    "module constant": f"X = {BIG}\n\n\ndef f(a):\n    raise ValueError('got ' + X)\n",
    "message part": f"def f(a):\n    errors = []\n    errors.append({BIG})\n    raise ValueError(' '.join(errors))\n",
    "guard": f"def f(a):\n    if a == {BIG}:\n        raise ValueError('guarded')\n",
    "local": f"def f(a):\n    loc = {BIG}\n    if a == loc:\n        raise ValueError('local')\n",
    "for head": f"def f(a):\n    for x in {BIG}:\n        raise ValueError('in a loop')\n",
    "with head": f"def f(a):\n    with open({BIG}):\n        raise ValueError('in a with')\n",
}
AFTER = "\n\ndef g(n):\n    if n > 1:\n        raise ValueError(f'n is {n}')\n"
TOO_DEEP = "not scanned: an expression here, or a name it reads, nests more than 100 levels deep"
TOO_LONG = "not scanned: a message, condition or context here is longer than 5000 characters"


HEAD_LINES = {"guard": 2, "for head": 2, "with head": 2, "except head": 4}  # else the raise's line


@pytest.mark.parametrize("kind, src, why", [(k, v, TOO_DEEP) for k, v in sorted(DEEP.items())]
                         + [(k, v, TOO_LONG) for k, v in sorted(LONG.items())])
def test_a_statement_too_deep_or_long_to_scan_is_a_located_warning(kind: str, src: str, why: str) -> None:
    from kb.scan.extract import extract

    src += AFTER
    raise_line = next(i for i, line in enumerate(src.splitlines(), 1) if "raise ValueError" in line)
    facts = extract(src.encode())
    assert facts.error is None
    assert [(r.qualname, r.template, r.guard) for r in facts.raises] == [("g", "n is {n}", "n > 1")]
    assert facts.skipped == ((HEAD_LINES.get(kind, raise_line), why),)


def test_names_bound_in_a_cycle_end() -> None:
    from kb.scan.extract import extract

    facts = extract(b"def f(x):\n    a = b\n    b = a\n    raise ValueError(a + 'x')\n"
                    b"def g(x):\n    a = b\n    b = a\n    raise ValueError(x % a)\n")
    assert [r.template for r in facts.raises] == ["{a}x", "{x % a}"] and facts.skipped == ()


def test_one_hostile_file_never_makes_the_build_impossible(tmp_path: Path, capsys) -> None:
    tree = fixture_tree(tmp_path / "tree", extra={"vllm/hostile.py": DEEP["message"] + AFTER})
    assert main(["scan", "--source", str(tree), "-o", str(tmp_path / "scan.json"), "--quiet"]) == 0
    warning = f"vllm/hostile.py:2: {TOO_DEEP}"
    assert capsys.readouterr().err == f"warning: {warning}\n"
    assert main(["scan", "--source", str(tree), "--strict", "-o", str(tmp_path / "strict.json")]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == f"Error: 1 scan warning(s) (--strict); first: {warning}"
    errors = write_entries(tmp_path / "errors", {"dcp.yaml": DCP_ENTRY, "dcp-max.yaml": DCP_MAX_ENTRY})
    site = tmp_path / "site"
    assert main(["build", "--source", str(tree), "--errors", str(errors), "-o", str(site), "--quiet"]) == 0
    assert capsys.readouterr().err == f"warning: {warning}\n"
    from kb.scan.ids import error_id

    assert (site / f"errors/{error_id('n is {n}', 'vllm/hostile.py')}/index.html").is_file()


# --- what the scanned tree says must not choose where files are written ----------------------------
def test_a_word_longer_than_a_file_name_makes_a_capped_slug(tmp_path: Path, capsys) -> None:
    from kb.records.present import slug_base

    site_of = next(iter(scan_records(fixture_tree(tmp_path / "t0")).values())).sites[0]
    assert slug_base("bad " + "x" * 300 + " value", site_of) == "bad-" + "x" * 64 + "-value"
    assert slug_base(" ".join([c * 70 for c in "abcdefghij"]), site_of) == "a" * 64  # at most 120, whole words
    assert len(slug_base("-".join(["abc"] * 200), site_of)) <= 120
    long_word = "w" * 300
    tree = fixture_tree(tmp_path / "tree", extra={
        "vllm/" + "m" * 200 + ".py": f"def f(x):\n    raise ValueError('bad {long_word} value')\n",
        "vllm/other.py": f"def g(x):\n    raise ValueError('bad {long_word} value')\n"})
    site = tmp_path / "site"
    errors = write_entries(tmp_path / "errors", {})
    assert main(["build", "--source", str(tree), "--errors", str(errors), "-o", str(site), "--quiet"]) == 0
    slugs = sorted(s for s in json.loads((site / "api/slugs.json").read_text()) if s.startswith("bad-"))
    assert slugs == ["bad-" + "w" * 64 + "-value-" + "m" * 64, "bad-" + "w" * 64 + "-value-other"]
    from kb.scan.ids import error_id

    ident = error_id(f"bad {long_word} value", "vllm/other.py")
    assert main(["new", ident, "--source", str(tree), "--errors", str(errors)]) == 0
    assert [p.name for p in errors.iterdir()] == ["bad-" + "w" * 64 + "-value-other.yaml"]


def scan_records(tree: Path) -> dict:
    from kb.records.merge import build_records
    from kb.scan.scanner import scan
    from kb.scan.source import from_dir

    with from_dir(tree, include_vendored=False) as t:
        return {r.id: r for r in build_records(scan(t, jobs=1))}


HOSTILE_VERSION = '__version__ = version = "../../../../elsewhere/x"\n__commit_id__ = "<b>../x"\n'


def everything_under(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")}


def test_a_hostile_version_never_names_a_path(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """`__version__` names the match index in the cache and the release pages of a
    multi-release build: a value that is not a version is ignored, with a located warning."""
    from conftest import make_git_repo

    cache = tmp_path / "deep" / "down" / "cache"
    monkeypatch.setenv("KB_CACHE_DIR", str(cache))
    files = tree_files("0.1.0", broken=False) | {"vllm/_version.py": HOSTILE_VERSION}
    tree = write_tree(tmp_path / "deep" / "down" / "tree", files)
    before = everything_under(tmp_path)
    message = ("The model's number of query heads per KV head (6) must be divisible by "
               "`--decode-context-parallel-size` (4) for GQA/MQA.")
    assert main(["explain", "--source", str(tree), message]) == 0
    assert DCP_ID in capsys.readouterr().out
    (index,) = (cache / "match-index").iterdir()
    assert index.name.startswith("ref-") and index.name.endswith(".json")
    added = everything_under(tmp_path) - before
    assert all(p.startswith("deep/down/cache") for p in added), sorted(added)
    assert not any("elsewhere" in p for p in added)

    assert main(["scan", "--source", str(tree), "-o", str(tmp_path / "scan.json"), "--quiet"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        "warning: vllm/_version.py:1: ignored: '../../../../elsewhere/x' is not a version",
        "warning: vllm/_version.py:2: ignored: '<b>../x' is not a commit id",
    ]

    repo = tmp_path / "deep" / "down" / "repo"
    make_git_repo(repo, {"v0.1.0": files, "v0.2.0": files | {"vllm/extra.py": "raise ValueError('extra')\n"}}).close()
    site = tmp_path / "deep" / "down" / "site"
    errors = write_entries(tmp_path / "errors", {})
    before = everything_under(tmp_path)
    assert main(["build", "--git", str(repo), "--refs", "v0.1.0,v0.2.0~0", "--errors", str(errors), "-o", str(site),
                 "--quiet"]) == 0
    added = everything_under(tmp_path) - before
    assert not any("elsewhere" in p for p in added)
    assert {p for p in added if not p.startswith(("deep/down/cache/", "deep/down/site/"))} == {"deep/down/site"}
    assert sorted(p.name for p in (site / "releases").iterdir() if p.is_dir()) == ["v0.1.0", "v0.2.0-0"]
    assert (site / "api/releases/v0.2.0-0.json").is_file()


@pytest.mark.parametrize("git_work_tree", [False, True])
def test_a_symlink_to_a_file_outside_the_tree_is_not_followed(tmp_path: Path, capsys, git_work_tree: bool) -> None:
    from conftest import make_git_repo

    outside = tmp_path / "secret.py"
    outside.write_text("def s():\n    raise ValueError('the secret text of a file outside the tree')\n")
    files = tree_files("0.1.0", broken=False)
    tree = tmp_path / "tree"
    if git_work_tree:
        make_git_repo(tree, {"v0.1.0": files}).close()
    else:
        write_tree(tree, files)
    (tree / "vllm/leak.py").symlink_to(outside)
    (tree / "vllm/inside.py").symlink_to(tree / "vllm/decoding.py")  # a link within the tree is read
    (tree / "vllm/_version.py").unlink()
    (tree / "vllm/_version.py").symlink_to(outside)
    if git_work_tree:
        import git

        with git.Repo(tree) as repo:
            repo.git.add("-A")
            repo.index.commit("links")
    out = tmp_path / "scan.json"
    assert main(["scan", "--source", str(tree), "-o", str(out), "--quiet"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        "warning: vllm/_version.py:1: not scanned: a symbolic link to a file outside the tree",
        "warning: vllm/leak.py:1: not scanned: a symbolic link to a file outside the tree",
        "warning: vllm/_version.py:1: ignored: a symbolic link to a file outside the tree",
    ]
    text = out.read_text()
    assert "secret" not in text and '"file": "vllm/inside.py"' in text


def test_wheel_members_with_unsafe_paths_are_refused(tmp_path: Path, capsys) -> None:
    from conftest import make_wheel

    evil = "def e():\n    raise ValueError('from an unsafe member path')\n"
    files = tree_files("0.1.0", broken=False) | {"vllm/../../escaped.py": evil, "vllm//empty.py": evil,
                                                 "vllm/a\x1b[2Jb.py": evil, "vllm/" + "n" * 300 + ".py": evil}
    wheel = make_wheel(tmp_path / "vllm-0.1.0-py3-none-any.whl", files)
    out = tmp_path / "scan.json"
    assert main(["scan", "--wheel", str(wheel), "-o", str(out), "--quiet"]) == 0
    why = "not scanned: not a plain relative path (.., empty parts, control characters or a part over 255 bytes)"
    assert sorted(capsys.readouterr().err.splitlines()) == sorted(
        f"warning: {p}:1: {why}" for p in ["vllm/../../escaped.py", "vllm//empty.py", "vllm/a\\x1b[2Jb.py",
                                            "vllm/" + "n" * 195 + "…"])
    assert "unsafe member path" not in out.read_text()
    site = tmp_path / "out" / "site"
    assert main(["build", "--wheel", str(wheel), "--errors", str(write_entries(tmp_path / "errors", {})), "-o",
                 str(site), "--quiet"]) == 0
    assert everything_under(tmp_path / "out") == {"site"} | {f"site/{p}" for p in everything_under(site)}


def test_a_class_name_longer_than_a_folder_name_is_a_located_warning(tmp_path: Path, capsys) -> None:
    name = "E" * 300
    tree = fixture_tree(tmp_path / "tree", extra={"vllm/long.py": f"class {name}(ValueError):\n    pass\n\n\n"
                                                                  f"def f():\n    raise {name}('long class')\n"})
    site = tmp_path / "site"
    assert main(["build", "--source", str(tree), "--errors", str(write_entries(tmp_path / "errors", {})), "-o",
                 str(site), "--quiet"]) == 0
    assert capsys.readouterr().err == ("warning: vllm/long.py:6: not scanned: an exception class name longer than 100 "
                                       "characters\n")
    assert sorted(p.name for p in (site / "browse/class").iterdir()) == ["NotAValueError", "StructuredDecisionError",
                                                                         "ValueError"]


# --- characters HTML cannot carry -----------------------------------------------------------------
def test_nul_controls_and_lone_surrogates_never_reach_the_html_raw(tmp_path: Path) -> None:
    from kb.scan.ids import error_id

    literal = r"bad \x00 nul \x01\x1b[31m red \x7f \x85 \ud800 lone"
    tree = fixture_tree(tmp_path / "tree", extra={
        "vllm/hostile.py": f'def f(x):\n    if x == "\\x00":\n        raise ValueError("{literal}")  # \x01 raw\n'})
    site = tmp_path / "site"
    assert main(["build", "--source", str(tree), "--errors", str(write_entries(tmp_path / "errors", {})), "-o",
                 str(site), "--quiet"]) == 0
    template = "bad \x00 nul \x01\x1b[31m red \x7f \x85 \ufffd lone"  # the surrogate cannot even be hashed
    page = (site / f"errors/{error_id(template, 'vllm/hostile.py')}/index.html").read_text(encoding="utf-8")
    assert "bad \ufffd nul \ufffd\ufffd[31m red \ufffd \ufffd \ufffd lone" in page
    assert "# \ufffd raw" in page  # the excerpt
    import re

    for p in site.rglob("*.html"):
        assert not re.search("[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]", p.read_text(encoding="utf-8")), p


def test_an_excerpt_line_is_capped(tmp_path: Path) -> None:
    """A megabyte line near many raises would fill each of their pages."""
    from kb.scan.scanner import EXCERPT_LINE_MAX

    raises = "".join(f"def f{i}(x):\n    if x == {i}:\n        raise ValueError('m{i}')\n" for i in range(5))
    tree = fixture_tree(tmp_path / "tree", extra={"vllm/wide.py": f"X = {BIG}\n{raises}"})
    records = [r for r in scan_records(tree).values() if r.file == "vllm/wide.py"]
    assert len(records) == 5
    first = records[0].sites[0].excerpt
    assert first.lines[0] == "X = '" + "a" * (EXCERPT_LINE_MAX - 5) + "…" and EXCERPT_LINE_MAX == 1000
    site = tmp_path / "site"
    assert main(["build", "--source", str(tree), "--errors", str(write_entries(tmp_path / "errors", {})), "-o",
                 str(site), "--quiet"]) == 0
    assert max(p.stat().st_size for p in site.rglob("*")) < 200_000


def test_a_file_of_thousands_of_raising_functions_scans_in_linear_time(tmp_path: Path) -> None:
    """About 1 MB of 9,938 small functions, each raising and calling the next: following the
    calls was quadratic in the functions of a file (175 s here); now a few seconds. The limit is
    kb_subprocess's generous 60 s, not a timing assert."""
    n = 9938
    body = "\n".join(f"def f{i}(x):\n    if x > {i}:\n        raise ValueError(f'bad {{x}} {i}')\n"
                     f"    return f{(i + 1) % n}(x)\n" for i in range(n))
    tree = write_tree(tmp_path / "tree", {"vllm/__init__.py": "", "vllm/many.py": body})
    out = tmp_path / "scan.json"
    done = kb_subprocess(tmp_path, "scan", "--source", str(tree), "--no-cache", "--jobs", "1", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(f"{n} sites, {n} ids in 2 files")
    sites = json.loads(out.read_text())["sites"]
    assert len(sites) == n


def test_bidirectional_controls_are_shown_as_escapes(tmp_path: Path, capsys) -> None:
    """A right-to-left override (Trojan Source) in a message or a source line would make a
    title, heading or excerpt read other than it is: every output shows its escape instead."""
    import gzip

    from kb.scan.ids import error_id

    rlo = "\u202e"
    tree = fixture_tree(tmp_path / "tree", extra={"vllm/hostile.py": (
        f'def f(x):\n    # comment {rlo} flipped\n    if x:\n        raise ValueError("Access granted{rlo} for user")\n')})
    ident = error_id(f"Access granted{rlo} for user", "vllm/hostile.py")  # vLLM's own message names it
    site = tmp_path / "site"
    assert main(["build", "--source", str(tree), "--errors", str(write_entries(tmp_path / "errors", {})), "-o",
                 str(site), "--quiet"]) == 0
    page = (site / f"errors/{ident}/index.html").read_text(encoding="utf-8")
    assert "<title>Access granted\\u202e for user" in page
    assert "Access granted\\u202e for user</h1>" in page
    assert "# comment \\u202e flipped" in page  # the excerpt
    record = json.loads((site / f"api/errors/{ident}").read_text())
    assert record["kb"]["title"] == record["errorMessage"] == "Access granted\\u202e for user"
    for p in site.rglob("*"):
        if p.is_file():
            data = gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
            text = data.decode("utf-8", "replace")
            if p.suffix in (".json", ".gz") or p.parent == site / "api/errors":  # also as JSON escapes
                text = json.dumps(json.loads(text), ensure_ascii=False)
            assert rlo not in text, p
    capsys.readouterr()
    assert main(["scan", "--source", str(tree), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert rlo not in out and "\\\\u202e" in out  # the scan's JSON: the escape, itself escaped by JSON
