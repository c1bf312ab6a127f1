"""vLLM's argument parser rebuilt from the scanned flags (kb/checks/cli_parse.py): on a small
vLLM-shaped tree, argparse's own messages for a bad choice, a bad number, an unknown flag, a
missing value, a boolean given a value; vLLM's rewriting of the words first; `kb check` prints
the parser's error first and exits 1; `kb lint` refuses an example fix vLLM's parser refuses.
Against the real vLLM 0.33.0 and 0.34.0: every recorded case of tests/data/oracle-parse-X.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kb.checks.cli_parse import human_readable_int, parse_command, rewrite
from kb.cli import main
from kb.configmodel import ConfigModel
from kb.jobs import read_flags, scan_release
from kb.scan.source import SourceSpec
from test_sets import dcp_tree

DATA = Path(__file__).parent / "data"


@pytest.fixture
def flags(tmp_path: Path) -> ConfigModel:
    return read_flags(SourceSpec(source_dir=str(dcp_tree(tmp_path / "tree"))))[1]


def error_of(model: ConfigModel, *words: str) -> str | None:
    e = parse_command(model, list(words)).error
    return None if e is None else e.printed


def test_argparse_messages_for_choices_numbers_unknown_flags_and_missing_values(flags: ConfigModel) -> None:
    assert error_of(flags, "m", "--runner", "fast") == (
        "vllm serve: error: argument --runner: invalid choice: 'fast' (choose from 'auto', 'generate', 'pooling')")
    assert error_of(flags, "m", "--dtype", "fp64") is None  # `ModelDType | str`: any word
    assert error_of(flags, "m", "-tp", "2.5") == (
        "vllm serve: error: argument --tensor-parallel-size/-tp: invalid int value: '2.5'")
    assert error_of(flags, "m", "--no-such-flag", "3") == "vllm serve: error: unrecognized arguments: --no-such-flag 3"
    assert error_of(flags, "m", "--master-port") == "vllm serve: error: argument --master-port: expected one argument"
    assert error_of(flags, "m", "--enable-expert-parallel=true") == (
        "vllm serve: error: argument --enable-expert-parallel/-ep/--disable-expert-parallel: ignored explicit "
        "argument 'true'")
    # the first bad word stops the parser
    assert error_of(flags, "m", "-tp", "x", "--runner", "fast") == (
        "vllm serve: error: argument --tensor-parallel-size/-tp: invalid int value: 'x'")


def test_accepted_commands_give_vllms_values(flags: ConfigModel) -> None:
    parsed = parse_command(flags, ["m", "--max_model_len", "98k", "-tp", "4", "--no-enable-expert-parallel",
                                   "--eplb-config.window_size", "10"])
    assert parsed.error is None
    assert parsed.values["max_model_len"] == 98_000 and parsed.values["tensor_parallel_size"] == 4
    assert parsed.values["enable_expert_parallel"] is False and parsed.values["model_tag"] == "m"
    assert parsed.values["eplb_config"] == {"window_size": 10}


def test_sizes_as_vllm_reads_them() -> None:
    assert human_readable_int("25.6k") == 25_600 and human_readable_int("4K") == 4096
    assert human_readable_int(" 12 ") == 12
    with pytest.raises(Exception, match="Decimals are not allowed with binary suffixes like K"):
        human_readable_int("1.5K")
    with pytest.raises(ValueError):
        human_readable_int("lots")


def test_vllms_rewriting_of_the_words_before_argparse() -> None:
    words, problem = rewrite(["-tp", "2", "--model", "m", "--max_num_seqs=4", "-O3", "--a.b", "1", "--a.c", "x"])
    assert problem is None
    assert words == ["m", "-tp", "2", "--max-num-seqs=4", "--optimization-level", "3", "--a", '{"b": 1, "c": "x"}']
    _, problem = rewrite(["--served-model-name", "x"])
    assert problem is not None and problem.stage == "validate"
    assert problem.printed.startswith("`model` should be provided as the first positional argument")


def test_kb_check_prints_the_parsers_error_first_and_exits_1(flags: ConfigModel, tmp_path: Path, capsys) -> None:
    root = tmp_path / "tree"  # the fixture's tree
    code = main(["check", "--source", str(root), "--no-cache", "--", "vllm", "serve", "m", "--runner", "fast"])
    out = capsys.readouterr().out
    assert code == 1
    assert out.splitlines()[:2] == [
        "vLLM stops while reading the command line, before it builds any config:",
        "    vllm serve: error: argument --runner: invalid choice: 'fast' (choose from 'auto', 'generate', 'pooling')"]
    code = main(["check", "--source", str(root), "--no-cache", "--json", "--", "vllm", "serve", "m", "-tp", "2"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["parseError"] is None and doc["predicted"] == []
    # -tp 2 without the model's config.json: the heads check is not judged, which is no all-clear
    assert code == 3 and doc["judged"] is False and "num_attention_heads" in doc["skipped"][0]["missing"]
    main(["check", "--source", str(root), "--no-cache", "--json", "--", "vllm", "serve", "m", "--bogus"])
    assert json.loads(capsys.readouterr().out)["parseError"] == {
        "stage": "argparse", "message": "vllm serve: error: unrecognized arguments: --bogus", "option": None,
        "exact": True}


# --- against the real vLLM ------------------------------------------------------------------------------
def oracle_cases(release: str = "0.33.0") -> list[dict]:
    doc = json.loads((DATA / f"oracle-parse-{release}.json").read_text())
    return list(doc["cases"])


def oracle_words(argv: list[str]) -> list[str]:
    """The words run_case.py gave vLLM: "$MODEL" is the model folder; without it (and without
    --model) the folder came first, as the positional model."""
    if "$MODEL" not in argv and not any(w == "--model" or w.startswith("--model=") for w in argv):
        return ["MODEL", *argv]
    return ["MODEL" if w == "$MODEL" else w for w in argv]


KNOWN_MISSES = {("--mm-processor-device", "not-a-choice")}  # choices made at run time from the platform


@pytest.mark.release
@pytest.mark.parametrize("release", ["0.33.0", "0.34.0"])
def test_every_recorded_real_vllm_case_gets_the_same_parser_verdict(release: str) -> None:
    model = read_flags(SourceSpec(vllm_version=release))[1]
    wrong = []
    for case in oracle_cases(release):
        words = oracle_words(case["argv"])
        got = parse_command(model, words).error
        if tuple(case["argv"][1:3]) in KNOWN_MISSES:
            assert got is None  # kb does not guess the platform's device type
            continue
        stopped = case["stage"] in ("argparse", "validate")
        if stopped != (got is not None):
            wrong.append((case["argv"], case["stage"], case["message"], got))
        elif got is not None and got.exact and case["stage"] == "argparse" and got.message != case["message"]:
            wrong.append((case["argv"], case["message"], got.message))
    assert not wrong, wrong


def test_kb_lint_refuses_an_example_fix_vllms_parser_or_a_field_constraint_refuses(tmp_path: Path) -> None:
    from entryhelpers import DCP_ENTRY, DCP_GUARD, DCP_ID, DCP_MAX_ID, DCP_TEMPLATE, write_entries
    from kb.records.lint import lint
    from kb.records.merge import build_records
    from test_order import ARG_UTILS_ORDER
    from test_sets import DCP, PARALLEL_DCP

    tree = dcp_tree(tmp_path / "tree")
    (tree / "vllm/engine/arg_utils.py").write_text(ARG_UTILS_ORDER)  # create_engine_config builds ParallelConfig
    (tree / "vllm/config/parallel.py").write_text(PARALLEL_DCP.replace(
        "    decode_context_parallel_size: int = 1", "    decode_context_parallel_size: int = Field(default=1, ge=1)"))
    scan = scan_release(SourceSpec(source_dir=str(tree)), use_cache=False)
    (r,) = [r for r in build_records(scan) if r.template == DCP]
    entry = DCP_ENTRY.replace(DCP_ID, r.id).replace(DCP_TEMPLATE, r.template).replace(DCP_GUARD, r.sites[0].fact.guard) \
        .replace(f"related: [{DCP_MAX_ID}]\n", "")
    assert list(lint(scan, write_entries(tmp_path / "good", {"dcp.yaml": entry})).problems) == []
    unknown = entry.replace("--decode-context-parallel-size 2\n", "--decode-context-parallel-size 2 --bogus\n")
    problems = list(lint(scan, write_entries(tmp_path / "bad", {"dcp.yaml": unknown})).problems)
    assert problems == ["bad/dcp.yaml:12: example_fix.after: vLLM's parser refuses it: vllm serve: error: "
                        "unrecognized arguments: --bogus"], problems
    zero = entry.replace("--decode-context-parallel-size 2\n", "--decode-context-parallel-size 0\n")
    problems = list(lint(scan, write_entries(tmp_path / "zero", {"dcp.yaml": zero})).problems)
    assert any("example_fix.after: vLLM cannot build ParallelConfig: --decode-context-parallel-size: Input should "
               "be greater than or equal to 1" in p for p in problems), problems


def test_the_parsers_hints_are_read_from_the_tree(tmp_path: Path) -> None:
    from test_flags import ARGPARSE_UTILS

    tree = dcp_tree(tmp_path / "tree")
    (tree / "vllm/utils/argparse_utils.py").write_text(ARGPARSE_UTILS + '''

class FlexibleArgumentParser:
    def error(self, message):
        if message.startswith("unrecognized arguments:") and re.search(r"(^|\\s)--task(=|\\s|$)", message):
            message += "\\n\\nHint: use --runner pooling."
        if message.startswith("unrecognized arguments:") and re.search(r"(", message):
            message += " a pattern that is not a regular expression is skipped"
        super().error(message)
''')
    model = read_flags(SourceSpec(source_dir=str(tree)))[1]
    assert model.parser_hints == (("(^|\\s)--task(=|\\s|$)", "\n\nHint: use --runner pooling."),
                                  ("(", " a pattern that is not a regular expression is skipped"))
    assert error_of(model, "m", "--task", "embed") == (
        "vllm serve: error: unrecognized arguments: --task embed\n\nHint: use --runner pooling.")
    assert error_of(model, "m", "--tasks") == "vllm serve: error: unrecognized arguments: --tasks"
    assert error_of(flags_without_hints(tmp_path), "m", "--task", "embed") == (
        "vllm serve: error: unrecognized arguments: --task embed")


def flags_without_hints(tmp_path: Path) -> ConfigModel:
    return read_flags(SourceSpec(source_dir=str(dcp_tree(tmp_path / "plain"))))[1]


def test_flags_argparse_cannot_register_give_no_verdict_never_a_traceback(flags: ConfigModel) -> None:
    from dataclasses import replace

    tp = next(f for f in flags.flags if f.name == "--tensor-parallel-size")
    clash = replace(tp, dest="other", name="--other")  # the same option strings twice: argparse refuses it
    broken = replace(flags, flags=(*flags.flags, clash))
    parsed = parse_command(broken, ["m", "--no-such-flag"])
    assert parsed.error is None and not parsed.checked
    odd = replace(tp, options=("tensor-parallel-size",), visible=(), name="x", dest="y", nargs="+", action="append")
    assert not parse_command(replace(flags, flags=(*flags.flags, odd)), ["m", "-tp", "x"]).checked
    long_words = ["m", *(["--runner", "auto"] * 5000)]
    assert parse_command(flags, long_words).error is None
