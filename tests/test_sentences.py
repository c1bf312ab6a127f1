"""Where a sentence ends (kb/entries/sentences.py), the one rule of every cut at a sentence: the
previews of what an error means and of its first fix (kb/entries/plain.py), the terminal's text
(kb/explain/prose.py), the home page's gists (kb/site/home.py) and an error's title from its
message (kb/records/present.py). An ellipsis, an abbreviation, a version or a file name ends no
sentence."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from kb.entries.plain import preview
from kb.entries.sentences import first_sentence_end, sentence_ends
from kb.explain.prose import lead
from kb.records.present import title_of
from kb.site.home import first_sentence

ERRORS = Path(__file__).resolve().parents[1] / "errors"
# a cut right after one of these cut a sentence in the middle
BAD_CUT = re.compile(r"((?<!\.)\.\.\.|\b(?:e\.g|i\.e|vs|cf)\.)[)\]\"']? …$")  # "host2 ...." is "..." and "."


def entry(name: str) -> dict:
    return yaml.safe_load((ERRORS / f"{name}.yaml").read_text(encoding="utf-8"))


def ends(text: str, **kw) -> list[str]:
    return [text[:i] for i in sentence_ends(text, **kw)]


@pytest.mark.parametrize("text, expected", [
    ("Use a smaller model, e.g. Llama-3-8B. Then retry.", ["Use a smaller model, e.g. Llama-3-8B.",
                                                          "Use a smaller model, e.g. Llama-3-8B. Then retry."]),
    ("The V1 engine (i.e. the default) vs. V0. It differs", ["The V1 engine (i.e. the default) vs. V0."]),
    ("Compare A cf. B and approx. 2 GB. Done", ["Compare A cf. B and approx. 2 GB."]),
    ("Upgrade to vLLM 0.34.0. It reads config.json. Done", ["Upgrade to vLLM 0.34.0.", "Upgrade to vLLM 0.34.0. It reads config.json."]),
    ("The log says WARNING ... Unknown variable. Next", ["The log says WARNING ... Unknown variable."]),
    ("LLM.encode(...) is called. LLM(...) too.", ["LLM.encode(...) is called.", "LLM.encode(...) is called. LLM(...) too."]),
    ("It waits… Then it fails. Next", ["It waits… Then it fails."]),
    ("Pass hosts host1 host2 .... Before that, check.", ["Pass hosts host1 host2 ....", "Pass hosts host1 host2 .... Before that, check."]),
    ("Use A, B, etc. and C. Next", ["Use A, B, etc. and C."]),
    ("A prefix (model.language_model. vs language_model.) and more. Next",
     ["A prefix (model.language_model. vs language_model.) and more."]),
    ('He said "stop." Then (it ended.) Next', ['He said "stop."', 'He said "stop." Then (it ended.)']),
    ("Set it. max_model_len is the limit.", ["Set it.", "Set it. max_model_len is the limit."]),  # code without backticks
    ("Why? Because! Yes", ["Why?", "Why? Because!"]),
    ("", []),
    ("...", []),
])
def test_where_a_sentence_ends(text: str, expected: list[str]) -> None:
    assert ends(text) == expected


def test_in_markdown_a_mark_inside_a_code_span_ends_nothing() -> None:
    text = "Run `vllm serve m. Then` once. Next"
    assert ends(text, code_spans=True) == ["Run `vllm serve m. Then` once."]
    assert ends(text) == ["Run `vllm serve m.", "Run `vllm serve m. Then` once."]


def test_stop_bounds_the_ends() -> None:
    text = "One. Two. Three."
    assert [text[:i] for i in sentence_ends(text, 9)] == ["One.", "One. Two."]
    assert first_sentence_end(text, 3) == -1 and first_sentence_end("no end here") == -1


def test_real_previews_are_not_cut_at_an_ellipsis() -> None:
    """Curated texts with `...` inside a sentence: the preview ends at a real sentence end."""
    meaning = entry("llm-encode-without-pooling-task")["meaning"]
    shown = preview(meaning)
    assert not shown.endswith("(...) …") and shown.endswith("…")
    assert "LLM.encode(...) is called without its pooling_task argument" in shown
    meaning = entry("unknown-vllm-env-var-strict")["meaning"]
    assert not preview(meaning).endswith("WARNING ... …")
    fix = entry("no-available-memory-for-cache-blocks")["solutions"][0]
    assert not preview(fix).endswith("device ... …")


def test_real_terminal_lead_is_not_cut_at_a_code_name_ending_with_a_dot() -> None:
    """`model.language_model.` vs `language_model.`: the dot of a name before "vs" ends nothing."""
    fix = entry("weights-no-module-or-parameter-named")["solutions"][0]
    shown, cut = lead(preview(fix), 160)
    assert cut and not shown.endswith("(model.language_model. …")


def test_real_gist_ends_before_a_sentence_that_starts_with_code() -> None:
    """"... through `HummingConfig`. gpt-oss checkpoints ...": the gist is the first sentence."""
    meaning = entry("humming-quantization-for-gpt-oss")["meaning"]
    assert first_sentence(meaning).endswith("through `HummingConfig`.")


@pytest.mark.parametrize("template, title", [  # vLLM 0.34.0's messages
    ("MoRIIO only supports sliding-window hybrid models (e.g. Gemma) and mamba/KDA groups under the hybrid KV cache "
     "manager. Unsupported KV cache group spec(s): {sorted(set(unsupported))}. Pass --disable-hybrid-kv-cache-manager "
     "to run without HMA.",
     "MoRIIO only supports sliding-window hybrid models (e.g. Gemma) and mamba/KDA groups under the…"),  # cut at a word
    ("External launcher initialized the default process group without a CPU (gloo) backend. vLLM requires both CPU "
     "and device backends. Pass backend='cpu:gloo,cuda:nccl' to torch.distributed.init_process_group().",
     "External launcher initialized the default process group without a CPU (gloo) backend."),
    ("`model` should be provided as the first positional argument when using `vllm serve`. i.e. `vllm serve <model> "
     "--<arg> <value>`.", "`model` should be provided as the first positional argument when using `vllm serve`."),
    ("{env} has been removed. {hint}", "{env} has been removed."),
    ("Unsupported version 0.33.0. Use 0.34.0 or later.", "Unsupported version 0.33.0."),
])
def test_a_title_is_the_messages_first_sentence(template: str, title: str) -> None:
    assert title_of(template, "ValueError", "f") == title


def shipped_texts() -> list[tuple[str, str]]:
    out = []
    for path in sorted(ERRORS.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            out += [(f"{path.name}: meaning", data["meaning"])] if data.get("meaning") else []
            out += [(f"{path.name}: solution {n}", s) for n, s in enumerate(data.get("solutions") or [])]
    return out


def test_no_shipped_text_is_cut_after_an_ellipsis_or_an_abbreviation() -> None:
    texts = shipped_texts()
    assert len(texts) > 300
    for where, text in texts:
        for limit in (400, 160, 120):
            shown = preview(text, limit)
            assert not BAD_CUT.search(shown), (where, limit, shown[-80:])
            terminal, _ = lead(preview(text), limit)
            assert not BAD_CUT.search(terminal), (where, limit, terminal[-80:])


def test_no_shipped_gist_ends_at_an_ellipsis_or_an_abbreviation() -> None:
    for where, text in shipped_texts():
        if where.endswith("meaning"):
            gist = first_sentence(text)
            assert not re.search(r"(\.\.\.|\b(?:e\.g|i\.e|vs|cf)\.)[)\]\"'`]?( …)?$", gist), (where, gist[-80:])
