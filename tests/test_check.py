"""The checker: cases against vLLM's guard, example fixes through kb check, and `kb check`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from entryhelpers import DCP_ENTRY, DCP_ID, DCP_MAX, DCP_MAX_ENTRY, DCP_MAX_FILE, DCP_MAX_ID, write_entries
from fixture_tree import tree_files, write_tree
from kb.cli import main
from kb.checks.launch import command_words, parse_launch
from kb.records.lint import lint
from sitehelpers import EVIL


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    files = tree_files("0.1.0", broken=False) | {"vllm/entrypoints/evil.py": EVIL, DCP_MAX_FILE: DCP_MAX}
    return write_tree(tmp_path / "tree", files)


@pytest.fixture
def entries(tmp_path: Path) -> Path:
    return write_entries(tmp_path / "errors", {"dcp.yaml": DCP_ENTRY, "dcp-max.yaml": DCP_MAX_ENTRY})


@pytest.fixture
def config(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"num_attention_heads": 48, "num_key_value_heads": 8,
                                                    "model_type": "llama"}))
    return folder


def kb_check(capsys, tree: Path, entries: Path, config: Path, *flags: str, json_out: bool = False) -> tuple[int, str]:
    argv = ["check", "--source", str(tree), "--errors", str(entries), "--model-config", str(config)]
    argv += ["--json"] if json_out else []
    code = main(argv + ["--", "vllm", "serve", "org/model", *flags])
    return code, capsys.readouterr().out


def test_reference_page_before_and_after(capsys, tree: Path, entries: Path, config: Path) -> None:
    code, out = kb_check(capsys, tree, entries, config, "--tensor-parallel-size", "16", "--decode-context-parallel-size",
                         "4", json_out=True)
    data = json.loads(out)
    assert code == 1
    assert [p["id"] for p in data["predicted"]] == [DCP_MAX_ID, DCP_ID]
    dcp = data["predicted"][1]
    assert dcp["message"] == ("The model's number of query heads per KV head (6) must be divisible by "
                              "`--decode-context-parallel-size` (4) for GQA/MQA.")
    assert dcp["url"] == f"/errors/{DCP_ID}/" and dcp["firstSolution"].startswith("Set `--decode-context")
    # the reference page's "after" is wrong: the sibling error fires, 16 // 8 = 2
    code, out = kb_check(capsys, tree, entries, config, "-tp", "16", "-dcp", "3")
    assert code == 1
    assert out.startswith("1 error predicted for this launch:")
    assert f"{DCP_MAX_ID}  ValueError  vllm/config/dcp.py:9" in out
    assert ("`--decode-context-parallel-size` (3) exceeds the maximum supported value (2) for `--tensor-parallel-size` "
            "(16) and 8 model KV heads.") in out
    assert DCP_ID not in out
    code, out = kb_check(capsys, tree, entries, config, "--tensor-parallel-size=16", "--decode-context-parallel-size=2")
    assert code == 0 and out.startswith("No error predicted")


def test_skipped_checks_and_ignored_flags(capsys, tree: Path, entries: Path, tmp_path: Path) -> None:
    # with DCP 1 the DCP checks decide clean without the model's heads (an input matters only where
    # the condition reaches it); with DCP 2 they need them
    assert main(["check", "--source", str(tree), "--errors", str(entries), "--", "vllm", "serve", "m", "-tp", "16"]) == 0
    assert "Not judged" not in capsys.readouterr().out
    code = main(["check", "--source", str(tree), "--errors", str(entries), "--", "vllm", "serve", "m", "-tp", "16",
                 "-dcp", "2", "--gpu-memory-utilization", "0.8", "--trust-remote-code", "--foo-bar", "7"])
    out = capsys.readouterr().out
    assert code == 3  # no error predicted, but not judged: two checks lack the model's config.json
    assert out.startswith("Not judged: 2 checks that could raise an error for this launch did not run")
    assert "No error predicted" not in out
    assert ("  2 need the model's config.json: pass --model-config FILE_OR_DIR (or download the model so kb finds it "
            "in the Hugging Face cache)") in out
    assert (f"  {DCP_ID}  The model's number of query heads per KV head ({{num_q_per_kv}}) must be divisible by…  "
            "(needs num_attention_heads, num_key_value_heads, kv_lora_rank)") in out
    assert "Flags no check reads (ignored): --trust-remote-code --foo-bar" in out


def test_usage_errors(capsys, tree: Path, entries: Path, tmp_path: Path) -> None:
    assert main(["check", "--source", str(tree), "--errors", str(entries)]) == 2
    assert capsys.readouterr().err.strip().endswith("Error: give the launch command after --, e.g. kb check -- vllm "
                                                    "serve MODEL --tensor-parallel-size 8")
    assert main(["check", "--source", str(tree), "--errors", str(entries), "--model-config", str(tmp_path / "none"),
                 "--", "vllm", "serve", "m"]) == 2
    assert capsys.readouterr().err.strip().endswith(f"Error: {tmp_path / 'none'}: no config.json there")


def test_launch_parsing() -> None:
    words = command_words("# before\nvllm serve org/m \\\n  -tp 8 --enable-expert-parallel \\\n"
                          "  --speculative-config '{\"method\": \"eagle3\", \"num_speculative_tokens\": 3}' "
                          "--max-model-len 32k --no-enable-chunked-prefill && echo done")
    launch = parse_launch(words, {"text_config": {"num_attention_heads": 32}}, {"gpu_count": 8})
    v = launch.values
    assert launch.model == "org/m"
    assert (v["tensor_parallel_size"], v["enable_expert_parallel"], v["spec_method"], v["spec_tokens"]) == (8, True, "eagle3", 3)
    assert (v["max_model_len"], v["enable_chunked_prefill"], v["num_attention_heads"], v["gpu_count"]) == (32000, False, 32, 8)
    assert v["num_key_value_heads"] == 32  # absent from config.json: one per attention head
    assert v["pipeline_parallel_size"] == 1 and v["kv_lora_rank"] == 0  # vLLM's defaults
    assert "max_num_batched_tokens" not in v  # derived from GPU memory at run time: unknown
    assert parse_launch(["vllm", "serve", "m", "-tp", "eight"]).problems == ("-tp: cannot read 'eight' as an integer",)


def test_lint_runs_cases_against_the_guard_and_the_example_fixes(tree: Path, entries: Path, tmp_path: Path) -> None:
    from kb.scan.scanner import scan
    from kb.scan.source import from_dir

    with from_dir(tree, include_vendored=False) as t:
        result = scan(t, jobs=1)
    report = lint(result, entries)
    assert report.problems == () and (report.checks, report.cases, report.fixes_run) == (2, 5, 2)
    # a wrong case, a guard disagreement and a wrong "after" are all located
    bad = DCP_ENTRY.replace("decode_context_parallel_size: 3}, raises: false", "decode_context_parallel_size: 5}, raises: false")
    bad = bad.replace("--decode-context-parallel-size 2", "--decode-context-parallel-size 3")
    write_entries(entries, {"dcp.yaml": bad})
    got = lint(result, entries).problems
    assert got == (
        "errors/dcp.yaml:24: case says raises: false, but raises_when gives true",
        "errors/dcp.yaml:24: vLLM's own guard gives true for this case, the case says false",
        f"errors/dcp.yaml:12: example_fix.after still predicts: {DCP_MAX_ID} (`--decode-context-parallel-size` (3) "
        "exceeds the maximum supported value (2) for `--tensor-parallel-size` (16) and 8 model KV heads.)",
    )


def test_unbound_guard_needs_a_binding_or_manual(tree: Path, entries: Path) -> None:
    from kb.scan.scanner import scan
    from kb.scan.source import from_dir

    with from_dir(tree, include_vendored=False) as t:
        result = scan(t, jobs=1)
    write_entries(entries, {"dcp.yaml": DCP_ENTRY.replace('    self.use_mla: "kv_lora_rank > 0"\n', "")})
    problems = lint(result, entries).problems
    assert problems == ("errors/dcp.yaml:14: vLLM's guard `decode_context_parallel_size > 1 and not self.use_mla and "
                        "num_q_per_kv % decode_context_parallel_size != 0` cannot be evaluated (attribute access is not "
                        "allowed: self.use_mla): bind it in source_bindings, or set source_check: manual with a reason",)


def test_kb_new_writes_a_prefilled_skeleton(capsys, tree: Path, tmp_path: Path) -> None:
    folder = tmp_path / "new-errors"
    folder.mkdir()
    assert main(["new", DCP_ID, "--source", str(tree), "--errors", str(folder)]) == 0
    (path,) = folder.glob("*.yaml")
    text = path.read_text()
    assert path.name == "the-model-s-number-of-query-heads-per-kv-head.yaml"
    assert "message: The model's number of query heads per KV head ({num_q_per_kv})" in text
    assert "when `num_q_per_kv % decode_context_parallel_size != 0`, inside:" in text
    assert "`num_q_per_kv = total_num_attention_heads // total_num_kv_heads`" in text
    assert "guard: decode_context_parallel_size > 1 and not self.use_mla and num_q_per_kv %" in text
    assert main(["new", DCP_ID, "--source", str(tree), "--errors", str(folder)]) == 1
    assert "already exists: edit it instead" in capsys.readouterr().err
    # the skeleton loads, and lint points at every TODO
    from kb.entries.load import load_entries

    found = [p.message for p in load_entries(folder).problems]
    assert found and all(m.startswith("unfinished: TODO left in") for m in found)
    assert main(["new", "0000000000000000", "--source", str(tree), "--errors", str(folder)]) == 1


def test_build_shows_the_checker_and_the_checked_fix(tmp_path: Path, tree: Path, entries: Path) -> None:
    out = tmp_path / "site"
    assert main(["build", "--source", str(tree), "--errors", str(entries), "-o", str(out), "--quiet"]) == 0
    html = (out / f"errors/{DCP_ID}/index.html").read_text()
    assert "<h2>Check your configuration</h2>" in html and "data-tree=" in html
    assert "✔ Checked: <code>kb check</code> predicts this error" in html
    assert "0.1.0" in html and 'class="badge curated"' in html
    record = json.loads((out / f"api/errors/{DCP_ID}").read_text())
    assert record["kb"]["curated"] and record["kb"]["check"]["raisesWhen"].startswith("decode_context_parallel_size > 1")
    assert record["exampleFix"].startswith("# before\nvllm serve org/m --tensor-parallel-size 16")
    assert "2 of 9 errors curated" in (out / "index.html").read_text()


def test_build_fails_on_malformed_entries_unless_keep_going(capsys, tmp_path: Path, tree: Path, entries: Path) -> None:
    write_entries(entries, {"bad.yaml": "id: nothex\nmeaning: x\ncolour: red\n"})
    out = tmp_path / "site"
    assert main(["build", "--source", str(tree), "--errors", str(entries), "-o", str(out), "--quiet"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == ["errors/bad.yaml:1: id must be 16 lowercase hex characters (got 'nothex')",
                   "errors/bad.yaml:3: unknown key 'colour'",
                   "Error: 2 problem(s) in curated entries (--keep-going skips the malformed ones)"]
    assert not out.exists()
    assert main(["build", "--source", str(tree), "--errors", str(entries), "-o", str(out), "--quiet", "--keep-going"]) == 0
    assert "warning: skipped: errors/bad.yaml:3: unknown key 'colour'" in capsys.readouterr().err
    assert (out / f"errors/{DCP_ID}/index.html").is_file()


def test_stale_entries_show_a_notice(tmp_path: Path, tree: Path, entries: Path) -> None:
    write_entries(entries, {"dcp.yaml": DCP_ENTRY.replace("for GQA/MQA.\"", "for GQA.\"")})
    out = tmp_path / "site"
    assert main(["build", "--source", str(tree), "--errors", str(entries), "-o", str(out), "--quiet"]) == 0
    html = (out / f"errors/{DCP_ID}/index.html").read_text()
    assert "<strong>May be out of date since vLLM 0.1.0.</strong>" in html


def test_bad_values_are_located_and_only_their_checks_do_not_run(capsys, tree: Path, entries: Path,
                                                                   tmp_path: Path) -> None:
    """A value of the wrong type or out of range is one located problem; the checks that need it
    do not run (no default stands in), every other check still does; exit 2."""
    config = tmp_path / "config.json"
    config.write_text('{\n  "model_type": "llama",\n  "num_attention_heads": "%099999999999d",\n'
                      '  "num_key_value_heads": 8\n}\n')
    code = main(["check", "--source", str(tree), "--errors", str(entries), "--model-config", str(config), "--json",
                 "--", "vllm", "serve", "m", "-tp", "16", "-dcp", "3"])
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert code == 2
    assert [p["id"] for p in data["predicted"]] == [DCP_MAX_ID]  # needs no attention heads: still runs
    assert data["notRun"] == [{"id": DCP_ID, "reason": "bad input num_attention_heads"}]
    problem = f'{config}:3: num_attention_heads: expected an integer, got "%099999999999d"'
    assert data["problems"] == [problem]
    assert captured.err == f"Error: {problem}\n"
    config.write_text('{"num_attention_heads": "twenty", "num_key_value_heads": 8}')
    assert main(["check", "--source", str(tree), "--errors", str(entries), "--model-config", str(config),
                 "--", "vllm", "serve", "m", "-tp", "16", "-dcp", "2"]) == 2
    out = capsys.readouterr().out
    assert f"1 check(s) not run:\n  {DCP_ID}: bad input num_attention_heads" in out
    assert f'Bad input (the checks that need it did not run):\n  {config}:1: num_attention_heads: expected an ' \
           f'integer, got "twenty"' in out


def test_out_of_range_flags_are_bad_input_not_a_crash(capsys, tree: Path, entries: Path, config: Path) -> None:
    code, out = kb_check(capsys, tree, entries, config, "-tp", "0", "-dcp", "2", json_out=True)
    data = json.loads(out)
    assert code == 2 and data["predicted"] == []
    assert data["problems"] == ["-tp: must be at least 1, got 0"]
    assert sorted(n["id"] for n in data["notRun"]) == sorted([DCP_ID, DCP_MAX_ID])
    for flags, problem in [(["--max-model-len", "1e400k"], "--max-model-len: cannot read '1e400k' as an integer"),
                           (["--gpu-memory-utilization", "nan"], "--gpu-memory-utilization: expected a finite number, "
                                                                 "got NaN"),
                           (["--enable-lora=maybe"], "--enable-lora: cannot read 'maybe' as a boolean"),
                           (["-sc", '{"num_speculative_tokens": "3"}'],
                            '--speculative-config num_speculative_tokens: expected an integer, got "3"'),
                           (["-sc", "[" * 100_000], "--speculative-config: JSON nested too deeply")]:
        assert parse_launch(["vllm", "serve", "m", *flags]).problems == (problem,), flags
    launch = parse_launch(["vllm", "serve", "m"], {"num_attention_heads": 32, "num_key_value_heads": True},
                          {"gpu_count": -1, "compute_capability": float("inf")})
    assert launch.problems == ('config.json: num_key_value_heads: expected an integer, got true',
                               "--gpu-count: must be at least 0, got -1",
                               "--compute-capability: expected a finite number, got Infinity")
    assert "num_key_value_heads" not in launch.values  # bad: not replaced by num_attention_heads
    launch = parse_launch(["vllm", "serve", "m", "-tp", "9" * 4000, "--dtype", "x" * 20_000],
                          {"num_attention_heads": 10**4000, "model_type": ["llama"], "num_experts": {"n": 8}})
    assert launch.problems == ("-tp: out of range (more than 2**63), got an integer of 4000 digits",
                               '--dtype: longer than 10000 characters, got "' + "x" * 56 + "...",
                               "config.json: num_attention_heads: out of range (more than 2**63), got an integer of "
                               "4001 digits",
                               "config.json: num_experts: expected an integer, got a JSON object",
                               "config.json: model_type: expected a string, got a JSON array")
    assert set(launch.bad) == {"tensor_parallel_size", "dtype", "num_attention_heads", "num_experts", "model_type",
                               "num_key_value_heads"}  # absent, and what stands in for it is bad


@pytest.mark.parametrize("content, problem", [
    ("[" * 100_000 + "]" * 100_000, "not a readable config.json: nested too deeply"),
    ('{"a":' * 100_000 + "1" + "}" * 100_000, "not a readable config.json: nested too deeply"),
    ('{"num_attention_heads": 1' + "0" * 5000 + "}", "not a readable config.json: Exceeds the limit (4300 digits)"),
    ("[1, 2]", "config.json must hold a JSON object"),
    ('{"a": 1,\n "b": }', "not a readable config.json: Expecting value (column 7)"),
])
def test_unreadable_config_is_a_usage_error(capsys, tree: Path, entries: Path, tmp_path: Path, content: str,
                                             problem: str) -> None:
    config = tmp_path / "config.json"
    config.write_text(content)
    assert main(["check", "--source", str(tree), "--errors", str(entries), "--model-config", str(config),
                 "--", "vllm", "serve", "m"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    line = ":2" if "column 7" in problem else ""
    assert err.startswith(f"Error: {config}{line}: {problem}"), err


def test_config_with_a_byte_order_mark(capsys, tree: Path, entries: Path, tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_bytes(b"\xef\xbb\xbf" + json.dumps({"num_attention_heads": 48, "num_key_value_heads": 8}).encode())
    assert main(["check", "--source", str(tree), "--errors", str(entries), "--model-config", str(config),
                 "--", "vllm", "serve", "m", "-tp", "16", "-dcp", "4"]) == 1
    assert DCP_ID in capsys.readouterr().out


def test_config_that_is_not_a_regular_file(capsys, tree: Path, entries: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "model" / "config.json"
    fifo.parent.mkdir()
    os.mkfifo(fifo)  # opening it would wait for a writer forever
    assert main(["check", "--source", str(tree), "--errors", str(entries), "--model-config", str(fifo.parent),
                 "--", "vllm", "serve", "m"]) == 2
    assert capsys.readouterr().err.strip().endswith(f"Error: {fifo}: not a regular file")


def test_a_condition_that_fails_on_the_values_is_reported_for_its_check_only(tree: Path, entries: Path) -> None:
    from kb.checks.predict import predict
    from kb.jobs import curated_records, scan_release
    from kb.scan.source import SourceSpec

    records = curated_records([("", scan_release(SourceSpec(source_dir=str(tree))))], entries).records
    launch = parse_launch(["vllm", "serve", "m", "-tp", "16", "-dcp", "3"],
                          {"num_attention_heads": 48, "num_key_value_heads": 8})
    launch.values["num_key_value_heads"] = 0  # as if the vocabulary had no minimum
    outcome = predict(records, launch)
    assert sorted((n.record.id, n.reason.split(":")[0]) for n in outcome.not_run) == sorted([
        (DCP_ID, "its condition fails on these values"), (DCP_MAX_ID, "its condition fails on these values")])
    assert all("ZeroDivisionError" in n.reason for n in outcome.not_run) and not outcome.complete
    assert outcome.predicted == ()


def test_words_that_are_not_utf8_and_an_output_that_cannot_encode(tree: Path, entries: Path) -> None:
    import subprocess
    import sys

    words = [os.fsdecode(b"org/m\xff"), "--dtype", "bfloat16\u2603", os.fsdecode(b"--x\xfe")]
    for env in ({"PYTHONIOENCODING": "utf-8:strict"}, {"PYTHONIOENCODING": "ascii:strict"}):
        done = subprocess.run([sys.executable, "-m", "kb", "check", "--source", str(tree), "--errors", str(entries),
                               "--json", "--", "vllm", "serve", *words], capture_output=True, timeout=120,
                              env={**os.environ, "LC_ALL": "C.UTF-8", "PYTHONUTF8": "0", **env})
        assert b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
        assert done.returncode == 0
        data = json.loads(done.stdout)
        assert data["model"] == "org/m\ufffd" and data["ignoredFlags"] == ["--x\ufffd"]


def test_a_quantization_config_file_beside_config_json_is_read_from_the_folder(tmp_path: Path) -> None:
    """`quant_config_file` (kb/checks/vocab.py): true when a file of get_quant_config's names sits in
    the model folder; unknown for a config given without its folder."""
    from kb.checks.launch import parse_launch, read_config

    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    assert parse_launch(["vllm", "serve", "m"], read_config(tmp_path)).values["quant_config_file"] is False
    (tmp_path / "my_quantize_config.json").write_text("{}")  # vLLM matches the end of the name
    assert parse_launch(["vllm", "serve", "m"], read_config(tmp_path)).values["quant_config_file"] is True
    assert "quant_config_file" not in parse_launch(["vllm", "serve", "m"], {"model_type": "llama"}).values
