"""`kb explain --format short`: one line per error, `<id> <url> <first fix>`, for CI logs and agents
(the same lines the vLLM plugin prints: kb/explain/short.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.explain.prose import FIX_CHARS
from kb.jobs import match_index_for
from kb.scan.source import SourceSpec
from test_explain_terminal import PASTE, TP_ID, explain, tree_and_entries

OWN = ("With config.json num_attention_heads = 6, --tensor-parallel-size 1, 2, 3 or 6 (you have 4) passes vLLM's "
       "check for this error; kb tried 1 to 16, the powers of two to 1024 and the divisors of your numbers.")


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The match index of tests/test_explain_terminal.py's tree (release 0.1.0, a derived check)."""
    tree, errors = tree_and_entries(tmp_path_factory.mktemp("short"))
    return match_index_for(SourceSpec(source_dir=str(tree)), errors)


def test_one_line_per_error_id_page_of_the_release_and_first_fix_for_your_values(index: Path, capsys) -> None:
    code, out, err = explain(capsys, "--index", str(index), "--format", "short", PASTE)
    assert code == 0 and err == ""
    assert out == f"{TP_ID} /0.1.0/errors/{TP_ID}/ {OWN}\n"
    # a log with the error twice (other values) and a line of no error: one line each
    log = f"INFO starting\n{PASTE}\nINFO retrying\n{PASTE.replace('(4)', '(5)')}\n"
    code, out, _ = explain(capsys, "--index", str(index), "--format", "short", log)
    assert code == 0 and out.splitlines() == [f"{TP_ID} /0.1.0/errors/{TP_ID}/ {OWN}",
                                              f"{TP_ID} /0.1.0/errors/{TP_ID}/ " + OWN.replace("(you have 4)",
                                                                                               "(you have 5)")]


def test_the_curated_fix_as_plain_text_when_the_values_say_nothing(index: Path, capsys) -> None:
    """12 heads and TP 4: vLLM's condition holds for them, so no fix of the user's own: the curated
    one, plain text cut at a sentence."""
    paste = PASTE.replace("(6)", "(12)")
    _, out, _ = explain(capsys, "--index", str(index), "--format", "short", paste)
    ident, url, fix = out.rstrip("\n").split(" ", 2)
    assert (ident, url) == (TP_ID, f"/0.1.0/errors/{TP_ID}/")
    assert fix.startswith("Set --tensor-parallel-size (-tp) to a divisor") and "`" not in fix and "**" not in fix
    assert len(fix) <= FIX_CHARS + 2 and fix.endswith("…")


def test_whole_links_under_site_url_and_nothing_when_nothing_matches(index: Path, capsys, monkeypatch) -> None:
    _, out, _ = explain(capsys, "--index", str(index), "--format", "short", "--site-url", "https://e.example/", PASTE)
    assert out.startswith(f"{TP_ID} https://e.example/0.1.0/errors/{TP_ID}/ With config.json")
    monkeypatch.setenv("KB_SITE_URL", "https://k.example")
    _, out, _ = explain(capsys, "--index", str(index), "--format", "short", PASTE)
    assert out.startswith(f"{TP_ID} https://k.example/0.1.0/errors/{TP_ID}/ ")
    code, out, err = explain(capsys, "--index", str(index), "--format", "short", "no error of vLLM's here")
    assert (code, out, err) == (1, "", "")


@pytest.mark.parametrize("form", ["short", "text"])
def test_json_and_another_format_is_a_usage_error(index: Path, capsys, form: str) -> None:
    code, out, err = explain(capsys, "--index", str(index), "--json", "--format", form, PASTE)
    if form == "text":  # the default: --json alone
        assert code == 0 and out.startswith("{")
    else:
        assert code == 2 and out == ""
        assert err.splitlines()[-1] == "Error: --json and --format short ask for two outputs: give one"


def test_the_title_carries_the_user_s_own_values() -> None:
    """The plugin's title line: the values the match recovered put in place of the placeholders,
    whitespace folded and a long one cut; a placeholder with no value stays as written."""
    from kb.explain.short import VALUE_CHARS, filled_title

    title = "Unknown quantization method: {self.quantization}. Must be one of {choices} ({n})…"
    assert filled_title(title, (("self.quantization", "fp9"), ("n", "2\n"))) == \
        "Unknown quantization method: fp9. Must be one of {choices} (2)…"
    long = filled_title("got {x}", (("x", "y" * 500),))
    assert long == "got " + "y" * (VALUE_CHARS - 1) + "…"


def test_the_answer_s_title_is_filled_from_the_paste(index: Path) -> None:
    from kb.explain.match import Matcher, load_index
    from kb.explain.match import explain as match_explain
    from kb.explain.short import short_answer

    found = match_explain(PASTE, Matcher(load_index(index))).found[0]
    title = short_answer(found, None, "0.1.0").title
    assert "{" not in title and "(6)" in title, title
