"""kb explain: wrappers, cut-off messages, multi-line values, ambiguity, no match, and a
property test over the fixture templates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kb.cli import main
from kb.explain.index import match_index
from kb.explain.match import Matcher, explain, log_messages, unwrap
from kb.records.merge import build_records
from sitehelpers import fixture_scan

DCP = "d97d5d8528e2b364"
FILLED = ("The model's number of query heads per KV head (6) must be divisible by "
          "`--decode-context-parallel-size` (4) for GQA/MQA.")
EXTRA = {
    "vllm/dtypes.py": '''
def check(dtype, kind):
    if kind == 1:
        raise ValueError(f"Unsupported dtype: {dtype}")
    if kind == 2:
        raise ValueError(f"Unsupported dtype: {dtype} for the fp8 kv cache")
    if kind == 3:
        raise ValueError("Failed to find a kernel. Reasons: \\n" + "\\n".join(kind))
    if kind == 4:
        raise RuntimeError(
            "Engine core initialization failed. See root cause above. "
            f"Failed core proc(s): {dtype}"
            f"{f', failed frontend proc(s): {kind}' if kind else ''}")
''',
}


@pytest.fixture(scope="module")
def matcher(tmp_path_factory: pytest.TempPathFactory) -> Matcher:
    scan = fixture_scan(tmp_path_factory.mktemp("explain") / "tree", EXTRA)
    return Matcher(match_index(build_records(scan), "0.1.0"))


def best(matcher: Matcher, text: str):
    ex = explain(text, matcher)
    assert ex.found, text
    return ex.found[0].best


@pytest.mark.parametrize("text", [
    FILLED,
    "ValueError: " + FILLED,
    "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n    main()\nValueError: " + FILLED + "\n",
    "ERROR 11-30 12:00:00 [core.py:123] ValueError: " + FILLED,
    "(EngineCore pid=42) ERROR 11-30 12:00:00.123 [core.py:9] " + FILLED,
    "\x1b[1;31mValueError: " + FILLED + "\x1b[0m",
    ("ValueError: " + FILLED).replace(" ", "\r\n", 3) + "\r\n",
    "pydantic_core._pydantic_core.ValidationError: 1 validation error for ParallelConfig\n  Value error, " + FILLED
    + " [type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]\n"
      "    For further information visit https://errors.pydantic.dev/2.11/v/value_error",
])
def test_sees_through_wrappers(matcher: Matcher, text: str) -> None:
    m = best(matcher, text)
    assert (m.id, m.kind, m.values) == (DCP, "exact", (("num_q_per_kv", "6"), ("decode_context_parallel_size", "4")))


def test_a_long_log_with_several_errors(matcher: Matcher) -> None:
    log = "\n".join(["INFO 11-30 12:00:00 [api.py:1] starting"] * 50 + [
        "ERROR 11-30 12:00:01 [core.py:2] ValueError: " + FILLED,
        "INFO 11-30 12:00:02 [api.py:1] retrying",
        "ERROR 11-30 12:00:03 [core.py:2] ValueError: " + FILLED,
        "ERROR 11-30 12:00:04 [core.py:2] ValueError: Total number of attention heads (64) must be divisible by "
        "tensor parallel size (6).",
    ])
    ex = explain(log, matcher)
    assert [(f.best.id, f.line, f.count) for f in ex.found] == [(DCP, 51, 2), ("f644a7c8e4fdc46c", 54, 1)]


@pytest.mark.parametrize("text, value", [
    ("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}", "{}"),
    ("Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_0': 1}",
     "{'EngineCore_0': 1}"),
    ("Engine core initialization failed. See root cause above. Failed core proc(s): {}, failed frontend proc(s): [3]",
     "{}, failed frontend proc(s): [3]"),
])
def test_a_message_ending_in_side_by_side_placeholders_is_matched_exactly(matcher: Matcher, text: str,
                                                                            value: str) -> None:
    m = best(matcher, text)
    assert m.kind == "exact" and m.entry["parts"] == ["Engine core initialization failed. See root cause above. "
                                                      "Failed core proc(s): ", ""]
    assert m.values == (("dtype", value),)


def test_cut_off_message(matcher: Matcher) -> None:
    m = best(matcher, "ValueError: The model's number of query heads per KV head (6) must be divisible by `--decode-cont")
    assert (m.id, m.kind, m.values) == (DCP, "truncated", (("num_q_per_kv", "6"),))


def test_multi_line_and_multi_word_values(matcher: Matcher) -> None:
    text = "ValueError: Failed to find a kernel. Reasons: \n - cutlass: needs sm90\n - triton: no fp8 support\n"
    m = best(matcher, text)
    assert m.kind == "exact" and m.values[0][1] == "- cutlass: needs sm90 - triton: no fp8 support"
    m = best(matcher, "ValueError: Unsupported dtype: torch.float8 e4m3 (experimental)")
    assert m.values == (("dtype", "torch.float8 e4m3 (experimental)"),)


def test_ambiguous_matches_rank_the_most_specific_first(matcher: Matcher) -> None:
    ex = explain("ValueError: Unsupported dtype: fp8_e5m2 for the fp8 kv cache", matcher)
    found = ex.found[0]
    assert found.best.entry["parts"] == ["Unsupported dtype: ", " for the fp8 kv cache"]
    assert [o.entry["parts"] for o in found.others] == [["Unsupported dtype: ", ""]]
    assert found.others[0].values == (("dtype", "fp8_e5m2 for the fp8 kv cache"),)


def test_no_match_offers_the_closest_templates_only_as_suggestions(matcher: Matcher) -> None:
    ex = explain("ValueError: the number of query heads per KV group is odd", matcher)
    assert ex.found == ()
    assert ex.suggestions and ex.suggestions[0].id == DCP and ex.suggestions[0].kind == "similar"
    assert 0 < ex.suggestions[0].score < 1
    assert explain("completely unrelated words", matcher).suggestions == ()


def test_records_and_unwrap() -> None:
    assert log_messages("a\n  continued\nERROR 11-30 12:00:00 [x.py:1] b\n\nc") == [(1, "a continued"), (3, "b"), (5, "c")]
    assert unwrap("foo.bar.SomeError: message") == "message"


# Values may hold spaces and single newlines (multi-line values); a blank line ends a message
# in a log by design (log_messages), so it is not a value the matcher can recover.
SAFE = st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9 \n.]{0,12}[A-Za-z0-9])?", fullmatch=True).filter(
    lambda v: all(line.strip() for line in v.split("\n")))


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_filled_templates_map_back_to_their_id(matcher: Matcher, data) -> None:
    entry = data.draw(st.sampled_from([e for e in matcher.index["entries"] if e["literal"] >= 8]))
    values = [data.draw(SAFE) for _ in entry["names"]]
    text = entry["parts"][0] + "".join(v + p for v, p in zip(values, entry["parts"][1:]))
    wrapper = data.draw(st.sampled_from(["{}", "ValueError: {}", "ERROR 11-30 12:00:00 [core.py:1] ValueError: {}",
                                         "Value error, {} [type=value_error, input_value=1]"]))
    ex = explain(wrapper.format(text), matcher)
    assert ex.found and ex.found[0].best.id == entry["id"]
    assert [v for _, v in ex.found[0].best.values] == [" ".join(v.split()) for v in values]


def test_cli_reads_stdin_and_the_site_index(tmp_path: Path, capsys, monkeypatch) -> None:
    from sitehelpers import build_fixture

    site, _ = build_fixture(tmp_path)
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("ERROR 11-30 12:00:00 [c.py:1] ValueError: " + FILLED))
    assert main(["explain", "--site", str(site), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["found"][0]["match"]["id"] == DCP and data["found"][0]["match"]["values"] == {
        "num_q_per_kv": "6", "decode_context_parallel_size": "4"}
    assert main(["explain", "--site", str(site), "no vLLM error in here"]) == 1
    assert capsys.readouterr().out.startswith("No known vLLM error matches this text.")
    assert main(["explain", "--site", str(tmp_path / "nowhere"), "x"]) == 1
    assert "no match index there" in capsys.readouterr().err
    # An escape sequence in a pasted value (a terminal title, a bell) never reaches the terminal raw.
    hostile = FILLED.replace("(6)", "(6\x1b]0;pwned\x07\x9b2J)")
    for json_out in (False, True):
        assert main(["explain", "--site", str(site), hostile, *(["--json"] if json_out else [])]) == 0
        out = capsys.readouterr().out
        assert not set(out) & {"\x1b", "\x07", "\x9b"} and "\\u001b]0;pwned\\u0007\\u009b2J" in out
        if json_out:
            assert json.loads(out)["found"][0]["match"]["values"]["num_q_per_kv"] == "6\x1b]0;pwned\x07\x9b2J"


@pytest.mark.parametrize("paste", [
    pytest.param(f"(EngineCore pid=79) ValueError: {FILLED}", id="engine-core-prefix"),
    pytest.param(f"(EngineCore_DP0 pid=1234) ERROR 11-30 12:00:00 [core.py:708] ValueError: {FILLED}", id="dp-prefix"),
    pytest.param(f"[Bug]: ValueError: {FILLED}", id="issue-title"),
    pytest.param(f"vllm-1  | ValueError: {FILLED}", id="compose-prefix"),
    pytest.param(f"2024-05-01T10:00:00.1234567Z ValueError: {FILLED}", id="ci-timestamp"),
    pytest.param(f"I launched it with TP 16 and got `ValueError: {FILLED}`", id="prose-and-code-span"),
    pytest.param(f"**ValueError: {FILLED}**", id="emphasis"),
    pytest.param(f"ValueError: {FILLED[:-1]}", id="no-final-period"),
    pytest.param(f"ValueError: {FILLED}".lower(), id="lower-cased"),
    pytest.param(f"RuntimeError: Worker failed with error 'ValueError: {FILLED}', please check the stack trace above",
                 id="quoted-inside-another-error"),
    pytest.param(f"ray.exceptions.RayTaskError(ValueError): ray::RayWorkerWrapper.execute_method() (pid=9, "
                 f"ip=10.0.0.1)\nValueError: {FILLED}", id="ray-task-error"),
    pytest.param(f"pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n  Value error, "
                 f"{FILLED} [type=value_error, input_value=ArgsKwargs((), {{}}), input_type=ArgsKwargs]",
                 id="pydantic"),
])
def test_real_paste_formats(matcher: Matcher, paste: str) -> None:
    ex = explain(paste, matcher)
    assert ex.found and ex.found[0].best.id == DCP, [f.best.id for f in ex.found]
    assert dict(ex.found[0].best.values) == {"num_q_per_kv": "6", "decode_context_parallel_size": "4"}


def test_unbalanced_wrapping_is_dropped_balanced_quotes_stay() -> None:
    assert unwrap("error 'ValueError: too big.'") == "too big."
    assert unwrap("`ValueError: got 'x'`") == "got 'x'"
    assert unwrap("[Usage]: TypeError: bad") == "bad"


WORDS = st.text(alphabet="ab .", min_size=0, max_size=4)


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(WORDS, min_size=1, max_size=4), text=st.text(alphabet="ab .", max_size=14),
       anchors=st.sampled_from([(True, True), (False, False), (True, False)]))  # the three uses: exact, contained, cut
def test_fit_finds_what_a_lazy_regex_finds(parts: list[str], text: str, anchors: tuple[bool, bool]) -> None:
    import re

    start, end = anchors

    from kb.scan.fit import fit

    pattern = ("^" if start else "") + "(.+?)".join(re.escape(p) for p in parts) + ("$" if end else "")
    m = re.search(pattern, text)
    got = fit(parts, text, start, end)
    assert (got is None) == (m is None)
    if m is not None and got is not None:
        assert got[0] == list(m.groups()) and got[1] == m.end()


def test_a_near_miss_of_many_placeholders_takes_linear_time(matcher: Matcher) -> None:
    """The 10 KB line that took 106 s with backtracking regexes: bounded (generous limit)."""
    import time

    entry = max((e for e in matcher.index["entries"] if e.get("matchable")), key=lambda e: len(e["names"]))
    filler = "a " * 600
    line = "ValueError: " + entry["parts"][0] + "".join(filler + p for p in entry["parts"][1:-1]) + filler + "Z"
    started = time.perf_counter()
    explain(line * 3, matcher)
    assert time.perf_counter() - started < 5


# --- ranking by what the paste tells, and values that stay inside the message -----------------------
@pytest.fixture(scope="module")
def lookup(tmp_path_factory: pytest.TempPathFactory) -> Matcher:
    from sitehelpers import LOOKUP_EXTRA, lookup_wordings

    scan = fixture_scan(tmp_path_factory.mktemp("lookup") / "tree", LOOKUP_EXTRA)
    return Matcher(match_index(build_records(scan), "0.1.0", lookup_wordings(scan)))


def _lookup_best(lookup: Matcher, text: str):
    from sitehelpers import LOOKUP_PASTES

    assert text in LOOKUP_PASTES  # the browser's agreement test runs the same pastes
    return best(lookup, text)


def _template(m) -> str:
    return "".join(p + ("{}" if i < len(m.entry["names"]) else "") for i, p in enumerate(m.entry["parts"]))


def test_a_title_tag_and_a_missing_final_period_inside_a_text(lookup: Matcher) -> None:
    from sitehelpers import LOOKUP_PASTES

    m = _lookup_best(lookup, LOOKUP_PASTES[0])
    assert m.kind == "contained" and not m.entry.get("older") and m.entry["parts"][0] == "Model "
    assert m.values == (("model", "Qwen2ForCausalLM"),)  # not the less specific "{model} does not support LoRA"


def test_a_release_named_in_the_paste_picks_its_wording(lookup: Matcher) -> None:
    """`vllm==0.5.3` names a release none but the 0.4.3-0.5.5 wording covers; `vLLM version
    0.3.0` the 0.2.7-0.3.3 one: the same text, told apart by the release."""
    from sitehelpers import LOOKUP_PASTES

    assert _lookup_best(lookup, LOOKUP_PASTES[1]).id == "0ld0000000000b00"
    assert _lookup_best(lookup, LOOKUP_PASTES[2]).id == "0ld0000000000a00"
    plain = best(lookup, "ValueError: Model X does not support LoRA, but LoRA is enabled. Support for this model may "
                         "be added in the future.")
    assert not plain.entry.get("older") and plain.kind == "exact"  # no release named: the release's own first


def test_a_message_cut_inside_its_text_with_prose_after_it(lookup: Matcher) -> None:
    """Cut after "enabled." and followed by other words (here Chinese, after a marker glued to
    Chinese prose): the long template cut off explains more than the short one found whole."""
    from sitehelpers import LOOKUP_PASTES

    m = _lookup_best(lookup, LOOKUP_PASTES[3])
    assert m.kind == "truncated" and m.entry["parts"][0] == "Model "
    assert m.values == (("model", "Qwen2VLForConditionalGeneration"),)


def test_a_placeholder_at_the_start_does_not_take_the_text_before(lookup: Matcher) -> None:
    from sitehelpers import LOOKUP_PASTES

    m = _lookup_best(lookup, LOOKUP_PASTES[4])  # "{name} must be at least 1" would swallow "Error code: 400 - {..."
    assert m.entry["parts"][0] == "max_tokens must be at least 1, got " and m.values == (("value", "-2815"),)
    m = _lookup_best(lookup, LOOKUP_PASTES[6])
    assert m.entry["parts"] == ["", " does not support LoRA"] and m.values == (("model", "MyModel"),)


def test_a_message_beginning_with_a_value_and_cut_off(lookup: Matcher) -> None:
    """A template that begins with a placeholder, cut off after a value or inside its text: the
    long template it was cut from, not the short generic one found inside it."""
    from sitehelpers import LOOKUP_PASTES

    m = _lookup_best(lookup, LOOKUP_PASTES[-3])
    assert m.kind == "truncated" and m.entry["parts"][1] == " is not supported for quantization method "
    assert m.values == (("name", "torch.bfloat16"), ("value", "gptq"))
    m = _lookup_best(lookup, LOOKUP_PASTES[-2])  # a bracketed value, cut inside the text after the second
    assert m.kind == "truncated" and m.values == (("name", "[torch.float16, torch.bfloat16]"), ("value", "gptq"))


def test_a_cut_off_message_beginning_with_a_value_takes_one_value_only(lookup: Matcher) -> None:
    """Log text before the value is not the value: the cut-off match needs the line to start
    with it, so the text falls back to what is found inside it."""
    from sitehelpers import LOOKUP_PASTES

    m = _lookup_best(lookup, LOOKUP_PASTES[-1])
    assert m.kind != "truncated" and all(" " not in v for _, v in m.values)


def test_a_placeholder_at_the_end_takes_the_bracketed_value_only(lookup: Matcher) -> None:
    from sitehelpers import LOOKUP_PASTES

    m = _lookup_best(lookup, LOOKUP_PASTES[5])
    assert m.kind == "contained" and m.values == (("name", "gptq"), ("value", "['awq', 'squeezellm']"))


def test_edge_values_of_contained_matches() -> None:
    from kb.scan.fit import contained

    parts = ["", " failed: ", ""]
    assert contained(parts, "INFO [x] the (big) worker failed: boom now")[0] == ["worker", "boom"]
    assert contained(parts, "see [a, [b]] failed: (x (y)) and more")[0] == ["[a, [b]]", "(x (y))"]
    assert contained(parts, "`quoted` failed: 'a b' rest")[0] == ["quoted", "'a b'"]
    assert contained(parts, " failed: x") is None  # nothing before: no value


def test_the_browser_lookup_has_the_same_constants() -> None:
    """search.js repeats kb explain's thresholds; the agreement tests cover the logic, this the numbers."""
    import re as re_

    from kb.explain import fuzzy, match
    from kb.paths import data_dir
    from kb.scan import fit

    js = (data_dir("templates") / "static" / "search.js").read_text(encoding="utf-8")
    for module, name in ((fit, "MIN_LITERAL"), (match, "MIN_SIMILARITY"), (match, "NEAREST_FLOOR"),
                         (fuzzy, "FUZZY_MAX_TOKENS"), (fuzzy, "FUZZY_CANDIDATES"), (fuzzy, "FUZZY_MIN_WORDS"),
                         (fuzzy, "FUZZY_MIN_TOKENS"), (fuzzy, "FUZZY_EDITS"), (fuzzy, "WORD_COST"),
                         (fuzzy, "SIGN_COST")):
        found = re_.search(rf"\b{name} = ([0-9.]+)", js)
        assert found is not None, name
        assert float(found.group(1)) == float(getattr(module, name)), name


def test_spacing_and_words_split_by_a_wrap_are_probably_the_message(lookup: Matcher) -> None:
    """The same words and signs, spaced otherwise or a word split by a terminal wrap: `probably`,
    with the values; an edited word is not (bench/fuzzy.py: any edit names sibling errors too)."""
    from sitehelpers import LOOKUP_PASTES

    for text in LOOKUP_PASTES[7:9]:
        m = _lookup_best(lookup, text)
        assert (m.kind, m.values, m.differences) == ("probably", (("model", "Qwen2"),), ()), text
        assert not m.entry.get("older") and m.entry["parts"][0] == "Model "
    edited = LOOKUP_PASTES[8].replace("enabled", "switched on")
    assert all(f.best.kind != "probably" for f in explain(edited, lookup).found)


def test_align_counts_edits_and_lets_values_take_words() -> None:
    from kb.explain.fuzzy import _tokens, align, differences

    template = ["tensor", "parallel", "size", None, "is", "too", "big"]
    text = "tensor parallel size 16 or 32 is very big"
    toks = _tokens(text)
    cost, steps = align(template, [t[0] for t in toks])
    assert cost == 4 + 4  # "very" for "too": two words unrelated, one left out and one added
    assert differences(template, toks, text, steps) == ['"very" instead of "too"']
    assert [s for s in steps if s[0] == "v"] == [("v", 3, 3), ("v", 4, 3), ("v", 5, 3)]
    cost, _ = align(template, [t[0] for t in _tokens("tensor paral lel size 16 is too big")])
    assert cost == 0


BUILDERS = {"vllm/built.py": '''
class EngineDeadError(Exception):
    ENGINE_DEAD_MESSAGE = ("EngineCore encountered an issue. See stack trace (above) for the "
                           "root cause.")

    def __init__(self, *args, suppress_context: bool = False, **kwargs):
        super().__init__(self.ENGINE_DEAD_MESSAGE, *args, **kwargs)


class ClientDeadError(EngineDeadError):
    pass


class RetryableError(ValueError):
    def __init__(self, message: str = "Request failed; please retry later"):
        super().__init__(message)


def choose(backend, reason):
    def _make_log_unsupported(backend, reason):
        if reason:
            return (f"Unquantized MoE backend {backend.value} does not support the "
                    f"deployment configuration since {reason}.")
        return f"Unquantized MoE backend {backend.value} does not support the deployment configuration."

    if backend is None:
        raise EngineDeadError()
    if reason == 1:
        raise ClientDeadError()
    if reason == 2:
        raise RetryableError()
    raise ValueError(_make_log_unsupported(backend, reason))
'''}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Matcher, dict[int, str]]:
    scan = fixture_scan(tmp_path_factory.mktemp("built") / "tree", BUILDERS)
    lines = {s.line: s.id for s in scan.sites if s.file == "vllm/built.py"}
    return Matcher(match_index(build_records(scan), "0.1.0")), lines


@pytest.mark.parametrize("text, line, values", [
    ("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the "
     "root cause.", 26, ()),
    ("RetryableError: Request failed; please retry later", 30, ()),
    ("ValueError: Unquantized MoE backend triton does not support the deployment configuration since fp8 is off.",
     31, (("backend.value", "triton"), ("reason", "fp8 is off"))),
    ("Unquantized MoE backend flashinfer does not support the deployment configuration.", 31,
     (("backend.value", "flashinfer"),)),
])
def test_messages_built_by_a_function_or_an_exception_class(built, text: str, line: int, values) -> None:
    """The raise's own template is `{_make_log_unsupported(backend, reason)}` or empty (its id
    stays the public site's); the builder's templates are parts it is found by."""
    matcher, lines = built
    m = best(matcher, text)
    assert (m.id, m.kind, m.values) == (lines[line], "exact", values)


def test_a_subclass_takes_its_base_exceptions_message(built) -> None:
    matcher, lines = built
    found = explain("ClientDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.",
                    matcher).found[0]
    assert {found.best.id, *(o.id for o in found.others)} >= {lines[26], lines[28]}


def test_a_message_cut_off_on_a_line_that_is_not_the_longest(lookup: Matcher) -> None:
    from sitehelpers import LOOKUP_PASTES

    ex = explain(LOOKUP_PASTES[9], lookup)
    assert [(f.line, f.best.kind, f.best.entry["parts"][0], f.best.values) for f in ex.found] == [
        (3, "truncated", "Model ", (("model", "Qwen2"),))]


@pytest.mark.parametrize("i, values", [
    (10, (("name", "decoder"), ("value", "17772"), ("model", "16384"))),  # Xinference's prefix, an empty last value
    (11, (("name", "gptq"), ("value", "['awq', 'gptq_marlin']"))),  # inside a JSON string, quotes escaped twice
    (12, (("name", "gptq"), ("value", "['awq']"))),  # copied from a web page: &quot; and &#39;
])
def test_pastes_from_services_and_web_pages(lookup: Matcher, i: int, values) -> None:
    from sitehelpers import LOOKUP_PASTES

    m = _lookup_best(lookup, LOOKUP_PASTES[i])
    assert m.kind in ("exact", "contained") and m.values == values


def test_a_template_holding_a_backslash_before_a_quote_still_matches(tmp_path: Path) -> None:
    """Pastes lose the backslash of `\\'` (a message inside a JSON string); templates go through
    the same step, so that vLLM's own `'\\\\'` still finds its message."""
    extra = {"vllm/salt.py": 'def f():\n    raise ValueError("cache_salt must not contain \'@\', \'\\\\\\\\\', or NUL.")\n'}
    scan = fixture_scan(tmp_path / "tree", extra)
    (site,) = [s for s in scan.sites if s.file == "vllm/salt.py"]
    assert site.template == "cache_salt must not contain '@', '\\\\', or NUL."
    m = best(Matcher(match_index(build_records(scan), "0.1.0")), "ValueError: " + site.template)
    assert (m.id, m.kind) == (site.id, "exact")
