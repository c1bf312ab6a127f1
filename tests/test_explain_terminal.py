"""What `kb explain` and `kb search` print in a terminal (#32): curated Markdown as plain text, cut
at the end of a sentence and marked "…" with the page to read on; page links absolute under
`--site-url`, else KB_SITE_URL; the first fix led by the user's own values where vLLM's condition
for the error decides them (kb/derived/values.py). On the small vLLM-shaped tree of
tests/test_sets.py, with one curated entry written in Markdown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kb.cli import main
from kb.explain.index import index_problem
from kb.jobs import match_index_for
from kb.scan.ids import error_id
from kb.scan.source import SourceSpec
from test_derive import ARG_UTILS_DERIVE, PARALLEL_DERIVE
from test_sets import dcp_tree

TEMPLATE = ("Total number of attention heads ({total_num_attention_heads}) must be divisible by tensor parallel size "
            "({tensor_parallel_size}).")
TP_ID = error_id(TEMPLATE, "vllm/config/model.py")
PASTE = "ValueError: Total number of attention heads (6) must be divisible by tensor parallel size (4)."
MEANING = (
    "Tensor parallelism splits **every** attention layer by heads: each of the `--tensor-parallel-size` GPUs "
    "computes an equal, whole number of query heads. vLLM therefore requires the model's `num_attention_heads` "
    "(see [the model card](https://huggingface.co/docs/transformers)) to be an exact multiple of the "
    "tensor-parallel size, *and* checks it while the engine configuration is built, before any weights load. "
    "It is common with head counts that are not a power of two: 28 heads (Qwen2-7B), 40 (13B Llama), 52 "
    "(LLaMA-33B), and with 3, 5, 6 or 8 GPUs. There is no padding option: pick a size that divides the heads.")
SOLUTION = (
    "Set `--tensor-parallel-size` (`-tp`) to a divisor of the head count that is **not** larger than your GPU "
    "count, e.g. `-tp 4` for 28 heads on 8 GPUs (valid values 1, 2, 4, 7, 14, 28). For 40 heads on 3 GPUs use "
    "`-tp 2` and leave the third GPU to another replica. Use the remaining GPUs with pipeline parallelism instead, "
    "for example `--pipeline-parallel-size 3`, which splits by layers and has no head constraint at all. Check "
    "`text_config.num_attention_heads` for vision-language models: the language model's count is the one.")
ENTRY = f"""id: {TP_ID}
file: vllm/config/model.py
message: "{TEMPLATE}"
meaning: |
  {MEANING}
solutions:
  - >-
    {SOLUTION}
"""


# VllmConfig calls the model's parallel check once every config is built (as vLLM's vllm/config/vllm.py does)
VLLM_CONFIG = """
class VllmConfig:
    def __post_init__(self):
        self.model_config.verify_with_parallel_config(self.parallel_config)
"""


def tree_and_entries(root: Path) -> tuple[Path, Path]:
    """The tree of tests/test_derived.py (configs built from the flags: kb derives their checks) and
    the one Markdown entry."""
    tree = dcp_tree(root / "tree")
    (tree / "vllm/config/parallel.py").write_text(PARALLEL_DERIVE)
    (tree / "vllm/engine/arg_utils.py").write_text(ARG_UTILS_DERIVE)
    (tree / "vllm/config/vllm.py").write_text(VLLM_CONFIG)
    errors = root / "errors"
    errors.mkdir()
    (errors / "heads.yaml").write_text(ENTRY, encoding="utf-8")
    return tree, errors


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The match index `kb explain --source` compiles for them."""
    tree, errors = tree_and_entries(tmp_path_factory.mktemp("terminal"))
    return match_index_for(SourceSpec(source_dir=str(tree)), errors)


def explain(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["explain", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def line(out: str, start: str) -> str:
    (found,) = [x.strip() for x in out.splitlines() if x.strip().startswith(start)]
    return found[len(start):].strip()


def test_curated_markdown_prints_as_plain_text_cut_at_a_sentence(index: Path, capsys) -> None:
    from kb.entries.plain import plain_text

    code, out, _ = explain(capsys, "--index", str(index), PASTE)
    assert code == 0 and f"{TP_ID}  ValueError  vllm/config/model.py:" in out
    assert "**" not in out and "`" not in out and "](" not in out
    meaning, fix = line(out, "What it means:"), line(out, "In general:")
    for shown, markdown in ((meaning, MEANING), (fix, SOLUTION)):
        assert shown.endswith(". …")  # whole sentences, then the mark
        assert plain_text(markdown).startswith(shown.removesuffix(" …"))  # never cut inside a word
    assert "each of the --tensor-parallel-size GPUs" in meaning and "the model card" in meaning
    assert "e.g. -tp 4 for 28 heads" in fix  # "e.g." ends no sentence
    assert line(out, "Read on:") == f"/0.1.0/errors/{TP_ID}/"
    # the links are paths: said once how to make them whole
    assert out.count("KB_SITE_URL") == 1 and out.splitlines()[-1].endswith("to print whole URLs.")


def test_the_first_fix_leads_with_the_users_own_values(index: Path, capsys) -> None:
    _, out, _ = explain(capsys, "--index", str(index), PASTE)
    own = line(out, "First fix, for your values:")
    assert own.startswith("With config.json num_attention_heads = 6, --tensor-parallel-size 1, 2, 3 or 6 "
                          "(you have 4) passes vLLM's check for this error")
    lines = out.splitlines()
    assert next(i for i, x in enumerate(lines) if "First fix, for your values" in x) < \
        next(i for i, x in enumerate(lines) if "In general:" in x)  # the curated fix after it
    _, out, _ = explain(capsys, "--index", str(index), "--json", PASTE)
    (found,) = json.loads(out)["found"]
    assert found["yourValues"] == {"given": [["config.json num_attention_heads", 6]],
                                   "flags": [{"flag": "--tensor-parallel-size", "yours": 4, "passing": [1, 2, 3, 6]}]}
    # 40 heads with TP 6: the divisors of 40 beyond the first sixteen numbers are tried too
    _, out, _ = explain(capsys, "--index", str(index), PASTE.replace("(6)", "(40)").replace("(4)", "(6)"))
    assert "--tensor-parallel-size 1, 2, 4, 5, 8, 10, 20 or 40 (you have 6)" in out


def test_a_printed_expression_and_parts_of_the_condition_the_paste_does_not_show(index: Path, capsys) -> None:
    """`{num_q_per_kv}` prints `heads // kv_heads`: its value stands for that expression; the part
    `not self.use_mla`, which no paste shows, held (vLLM raised the error) and does not read DCP."""
    _, out, _ = explain(capsys, "--index", str(index), "The model's number of query heads per KV head (6) must be "
                        "divisible by `--decode-context-parallel-size` (4).")
    assert line(out, "First fix, for your values:").startswith(
        "With num_q_per_kv = 6, --decode-context-parallel-size 1, 2, 3 or 6 (you have 4) passes")
    _, out, _ = explain(capsys, "--index", str(index), "The model's number of query heads per KV head (52) must be "
                        "divisible by `--decode-context-parallel-size` (8).")  # its divisors are tried too
    assert "--decode-context-parallel-size 1, 2, 4, 13, 26 or 52 (you have 8)" in out
    # `enable_expert_parallel and tp > 4`: expert parallelism is on (vLLM raised it)
    _, out, _ = explain(capsys, "--index", str(index), "ValueError: expert parallel caps tp at 4, got 8")
    assert line(out, "First fix, for your values:").startswith(
        "Keeping the rest of your launch, --tensor-parallel-size 1, 2, 3 or 4 (you have 8) passes vLLM's check")


def test_values_for_which_vllms_condition_does_not_hold_get_no_fix_of_their_own(index: Path, capsys) -> None:
    """8 heads are divisible by TP 4: this paste is not the error as kb reads it, so nothing is said."""
    code, out, _ = explain(capsys, "--index", str(index), PASTE.replace("(6)", "(8)"))
    assert code == 0 and "for your values" not in out and line(out, "First fix:").startswith("Set --tensor-parallel")
    _, out, _ = explain(capsys, "--index", str(index), "--json", PASTE.replace("(6)", "(eight)"))
    assert json.loads(out)["found"][0]["yourValues"] is None


def test_links_are_absolute_under_site_url_else_kb_site_url(index: Path, capsys, monkeypatch) -> None:
    _, out, _ = explain(capsys, "--index", str(index), "--site-url", "https://errors.example.org/kb/", PASTE)
    assert line(out, "Read on:") == f"https://errors.example.org/kb/0.1.0/errors/{TP_ID}/" and "KB_SITE_URL" not in out
    monkeypatch.setenv("KB_SITE_URL", "https://env.example.org")
    _, out, _ = explain(capsys, "--index", str(index), PASTE)
    assert line(out, "Read on:") == f"https://env.example.org/0.1.0/errors/{TP_ID}/" and "KB_SITE_URL" not in out
    _, out, _ = explain(capsys, "--index", str(index), "--json", PASTE)
    assert json.loads(out)["found"][0]["match"]["url"] == f"https://env.example.org/0.1.0/errors/{TP_ID}/"
    _, out, _ = explain(capsys, "--index", str(index), "--site-url", "https://option.example.org", PASTE)
    assert line(out, "Read on:") == f"https://option.example.org/0.1.0/errors/{TP_ID}/"  # the option wins
    monkeypatch.setenv("KB_SITE_URL", "")  # empty: unset
    _, out, _ = explain(capsys, "--index", str(index), PASTE)
    assert line(out, "Read on:") == f"/0.1.0/errors/{TP_ID}/"


@pytest.mark.parametrize("command", [["explain", PASTE], ["search", "heads"]], ids=lambda c: c[0])
def test_a_bad_kb_site_url_is_a_located_usage_error(capsys, monkeypatch, tmp_path: Path, command: list[str]) -> None:
    monkeypatch.setenv("KB_SITE_URL", "javascript:alert(1)")
    code = main([command[0], "--source", str(tmp_path / "never-read"), *command[1:]])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.splitlines()[-1] == ("Error: KB_SITE_URL: must be an http:// or https:// URL with a host, "
                                    "e.g. https://errors.example.org (got 'javascript:alert(1)')")


def test_kb_search_prints_plain_previews_and_absolute_links(capsys, monkeypatch, tmp_path: Path) -> None:
    tree, errors = tree_and_entries(tmp_path)
    monkeypatch.setenv("KB_SITE_URL", "https://errors.example.org")
    assert main(["search", "--source", str(tree), "--errors", str(errors), "attention heads divisible"]) == 0
    out = capsys.readouterr().out
    assert "**" not in out and "`" not in out
    lines = out.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("  1. Total number of attention heads"))
    assert lines[at + 1].strip() == ("Tensor parallelism splits every attention layer by heads: each of the "
                                     "--tensor-parallel-size GPUs computes an equal, whole number of query heads. …")
    assert lines[at + 2].strip() == f"{TP_ID}  https://errors.example.org/0.1.0/errors/{TP_ID}/"
    assert "KB_SITE_URL" not in out


def test_a_cut_ends_at_a_sentence_else_a_word() -> None:
    from kb.explain.prose import fix_text, lead

    text = "One sentence ends here. The next one, e.g. this, goes on for a while longer than the limit."
    assert lead(text, 40) == ("One sentence ends here. …", True)
    assert lead(text, 60) == ("One sentence ends here. The next one, e.g. this, goes on…", True)  # less than half
    assert lead("Averyveryverylongword and more words here", 20) == ("Averyveryverylongword…", True)  # kept whole
    assert lead("Short words only here and there, never a stop", 30) == ("Short words only here and…", True)
    assert lead("Whole.", 30) == ("Whole.", False) and lead("Cut before. …", 30) == ("Cut before. …", True)
    assert lead("Cut before, exactly thirty. …", 27) == ("Cut before, exactly thirty. …", True)  # not cut again
    assert lead("A first sentence, long enough. Then the device ... error is raised.", 50) == \
        ("A first sentence, long enough. …", True)  # "..." ends no sentence
    assert fix_text("Use `-tp 4` **now**.") == ("Use -tp 4 now.", False)


def test_a_hand_made_index_with_checks_of_another_shape_is_refused_or_ignored() -> None:
    from kb.derived.values import own_values

    entry = {"id": "a" * 16, "title": "t", "cls": "ValueError", "file": "f.py", "line": 1, "func": "f",
             "curated": False, "parts": ["x ", "."], "names": ["n"], "literal": 3, "matchable": True}
    assert index_problem({"format": "kb-match/1", "entries": [entry | {"checks": "no"}]}) == \
        "entry 0: 'checks' is not list"
    for checks in ([1], [{"check": [], "flags": []}], [{"check": ["i", "f", 1, "((", [], [["n", "_v0"]], "", "", ""],
                                                        "flags": []}]):
        assert own_values(checks, (("n", "4"),)) is None


def test_the_renderers_shortcut_reads_every_shipped_fix_as_the_renderer_does() -> None:
    """Prose whose only markup is code spans is read without the Markdown renderer (kb/explain/prose.py):
    the same text as kb/entries/plain.py's, on every shipped entry's meaning and solutions."""
    import yaml

    from kb.entries.plain import plain_text
    from kb.explain.prose import plain_or_none

    texts = []
    for path in sorted((Path(__file__).parent.parent / "errors").glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        texts += [data.get("meaning") or "", *(data.get("solutions") or [])]
    fast = [(t, plain_or_none(t)) for t in texts if t]
    assert len(fast) > 1000 and sum(f is not None for _, f in fast) > len(fast) // 2
    assert [t for t, f in fast if f is not None and f != plain_text(t)] == []
    assert plain_or_none("Use **bold** or `code`") is None and plain_or_none("Use `-tp 4`.") == "Use -tp 4."
