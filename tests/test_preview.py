"""The plain-text preview of curated prose the search page and `kb explain` show (kb/entries/plain.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kb.entries.plain import closed, plain_text, preview

MEANING = ("With the default compilation mode (`VLLM_COMPILE`) vLLM compiles the model's graph pieces with "
           "`torch.compile`/Inductor on first start and stores the results under `$VLLM_CACHE_ROOT/torch_compile_cache` "
           "(`~/.cache/vllm/torch_compile_cache` by default), so later starts can reuse them. In "
           "`InductorAdaptor.compile` (`vllm/compilation/compiler_interface.py`) vLLM hooks Inductor to record the "
           "cache key of each graph piece; a **stale** cache from [another release](https://docs.vllm.ai/) makes "
           "the lookup fail with \"the key cannot be found in the cache of compiled pieces\" and this error.")


def test_the_text_is_what_the_page_shows_without_markdown() -> None:
    assert plain_text("Set `--max-model-len` to **at most** [the limit](https://x.y/z) &amp; *retry*.\n\n"
                      "- one\n- two") == "Set --max-model-len to at most the limit & retry. one two"
    assert plain_text("a < b and `x<y>`") == "a < b and x<y>"


def test_a_short_text_is_whole_and_a_long_one_ends_at_a_sentence() -> None:
    assert preview("Raise `--gpu-memory-utilization`.") == "Raise --gpu-memory-utilization."
    cut = preview(MEANING)
    assert cut == ("With the default compilation mode (VLLM_COMPILE) vLLM compiles the model's graph pieces with "
                   "torch.compile/Inductor on first start and stores the results under "
                   "$VLLM_CACHE_ROOT/torch_compile_cache (~/.cache/vllm/torch_compile_cache by default), so later "
                   "starts can reuse them. …")
    assert "`" not in cut and "**" not in cut and len(cut) <= 402


def test_without_a_sentence_end_late_enough_it_ends_at_a_word() -> None:
    text = "word " * 30 + "a-very-long-name_that " * 20
    cut = preview(text, 200)
    assert cut.endswith("…") and len(cut) <= 201 and text.startswith(cut[:-1]) and cut[-2] != " "
    assert text[len(cut) - 1] == " "  # the word before "…" is whole


def test_no_quote_or_bracket_is_left_open() -> None:
    text = ("The value must be one of the names vLLM lists " + "and more words " * 8 +
            'for example "the first of the quoted names that runs on past the end of the preview" or the other.')
    cut = preview(text, 150)
    assert cut.endswith("…") and '"' not in cut and closed(cut[:-1])
    paren = preview("Start " + "word " * 20 + "(an aside " + "that goes on " * 30 + ") end.", 120)
    assert "(" not in paren and paren.endswith("…")
    assert preview("It reads 'auto' or 'none' " + "x " * 200, 60).count("'") % 2 == 0
    assert closed("vLLM's models' names") and not closed('a "b') and not closed("(a") and not closed("see 'x")


def test_e_g_is_no_sentence_end() -> None:
    text = "Pick a smaller model, e.g. " + "a quantized one " * 30
    assert not preview(text, 200).endswith("e.g. …")


def test_the_match_index_carries_the_preview(tmp_path: Path) -> None:
    """What the search page's results and kb explain show as "What it means"."""
    from kb.explain.index import match_index
    from kb.model import Entry
    from kb.records.merge import build_records
    from sitehelpers import fixture_scan

    result = fixture_scan(tmp_path / "tree")
    records = build_records(result)
    first = records[0]
    records = [replace(first, entry=Entry(first.id, "errors/x.yaml", MEANING, solutions=("Remove the cache.",))),
               *records[1:]]
    entry = next(e for e in match_index(records, None)["entries"] if e["id"] == first.id)
    assert entry["meaning"] == preview(MEANING) and entry["meaning"].endswith("reuse them. …")


def test_prose_with_code_spans_only_skips_the_renderer_and_reads_the_same() -> None:
    """The preview reads prose whose only markup is code spans without the Markdown renderer: the
    same text as the renderer's, on every shipped entry's meaning."""
    import yaml

    from kb.entries.plain import _plain

    meanings = [yaml.safe_load(p.read_text(encoding="utf-8")).get("meaning") or ""
                for p in sorted((Path(__file__).parent.parent / "errors").glob("*.yaml"))]
    assert len(meanings) > 300
    assert [m for m in meanings if m and _plain(m) != plain_text(m)] == []
    assert _plain("Use **bold** or `code`") == "Use bold or code" and _plain("Use `-tp 4`.") == "Use -tp 4."
