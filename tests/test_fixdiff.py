"""The example fix on a page (#32): its commands compared as argument lists, the changed flag
marked on both sides, the text kept as written (copied, a command is the command)."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

import pytest

from kb.derived.guidance import request_example
from kb.site.fixdiff import Change, arguments, fix_code, fix_diff, listed_changes, marked_html, units

NODE_RANK = ("vllm serve meta-llama/Llama-3.3-70B-Instruct --max-model-len 32768 --tensor-parallel-size 8 "
             "--pipeline-parallel-size 2 --nnodes 2 --master-addr 10.0.0.1 --headless --node-rank {}")


def texts(text: str, spans: list[tuple[int, int]] | tuple[tuple[int, int], ...]) -> list[str]:
    return [text[a:b] for a, b in spans]


def plain(markup: str) -> str:
    """The text a browser shows of highlighted code."""
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def test_a_shell_command_splits_into_words_and_a_quoted_string_is_one() -> None:
    cmd = """vllm serve MODEL --kv-transfer-config '{"kv_connector": "x", "kv_role": "kv_both"}'  --x="a b" -tp 2"""
    assert texts(cmd, units(cmd)) == ["vllm", "serve", "MODEL", "--kv-transfer-config",
                                      """'{"kv_connector": "x", "kv_role": "kv_both"}'""", '--x="a b"', "-tp", "2"]
    assert texts(cmd, arguments(cmd)) == ["vllm", "serve", "MODEL",
                                          """--kv-transfer-config '{"kv_connector": "x", "kv_role": "kv_both"}'""",
                                          '--x="a b"', "-tp 2"]


def test_a_flag_takes_the_value_after_it_but_not_another_flag_a_negative_number_or_the_next_line() -> None:
    cmd = "vllm serve M --headless --node-rank 2 --seed -1 -- x --enforce-eager\nnext"
    assert texts(cmd, arguments(cmd)) == ["vllm", "serve", "M", "--headless", "--node-rank 2", "--seed -1", "--", "x",
                                          "--enforce-eager", "next"]


def test_python_splits_at_parentheses_and_commas_outside_brackets_and_strings() -> None:
    code = "SamplingParams(temperature=0.5, stop=['a b', 'c,d'], logit_bias={1: 2, 3: 4})  # it's"
    assert texts(code, units(code, "python")) == ["SamplingParams", "temperature=0.5", "stop=['a b', 'c,d']",
                                                  "logit_bias={1: 2, 3: 4}", "#", "it's"]


def test_the_changed_flag_is_marked_on_both_sides_and_listed() -> None:
    before, after = NODE_RANK.format(2), NODE_RANK.format(1)
    diff = fix_diff(before, after)
    assert texts(before, diff.before) == ["--node-rank 2"] and texts(after, diff.after) == ["--node-rank 1"]
    assert diff.changes == (Change("--node-rank 2", "--node-rank 1"),)


@pytest.mark.parametrize("before, after, marked_before, marked_after", [
    ("vllm serve M --enable-eplb", "vllm serve M --enable-expert-parallel --enable-eplb", [], ["--enable-expert-parallel"]),
    ("vllm serve M --quantization awq --dtype half", "vllm serve M --dtype half", ["--quantization awq"], []),
    ("vllm serve M -tp 4", "vllm serve M -tp 1 -pp 4", ["-tp 4"], ["-tp 1 -pp 4"]),  # one run, one mark
    ("vllm serve M", "vllm serve M", [], []),
])
def test_added_removed_and_replaced_arguments(before: str, after: str, marked_before: list[str],
                                              marked_after: list[str]) -> None:
    diff = fix_diff(before, after)
    assert texts(before, diff.before) == marked_before and texts(after, diff.after) == marked_after
    assert bool(diff.changes) == bool(marked_before or marked_after)


def test_a_request_fix_marks_the_changed_sampling_parameter() -> None:
    before = request_example("vllm serve MODEL", {"temperature": 0.5, "top_p": 2.0})
    after = request_example("vllm serve MODEL", {"temperature": 0.5, "top_p": 1.0})
    diff = fix_diff(before, after, "python")
    assert texts(before, diff.before) == ["top_p=2.0", """--request '{"temperature": 0.5, "top_p": 2.0}'"""]
    assert texts(after, diff.after) == ["top_p=1.0", """--request '{"temperature": 0.5, "top_p": 1.0}'"""]


def test_in_code_of_several_lines_a_line_opens_with_no_box() -> None:
    """A box that does not fit after a line's indentation would leave that line empty: the first
    argument of each line breaks inside instead; the marks of a run stay one per line."""
    before = 'x = f(\n    {"type": "text", "text": "a"},\n)'
    after = 'x = f(\n    {"type": "text", "text": "b"}, y=1\n)'
    code = fix_code(before, after, "python")
    assert not code.single_line and plain(code.after) == after
    marked = re.search(r'\n    <ins class="chg">(.*?)</ins>\n', code.after)  # no "a": it opens a line
    assert marked is not None and plain(marked.group(1)) == '{"type": "text", "text": "b"}, y=1'  # one run
    assert code.after.startswith('<span class="n">x</span> <span class="a">')  # "x" opens the first line


def test_a_rewritten_program_is_marked_but_not_listed_in_words() -> None:
    before = "a = 1\nb = 2\nc = 3\nd = 4\n"
    after = "a = 5\nb = 6\nc = 7\nd = 8\n"
    diff = fix_diff(before, after, "python")
    assert len(diff.changes) == 4 and listed_changes(diff) == ()
    assert fix_code(before, after, "python").marked


def test_the_html_shows_the_command_as_written_escaped_with_the_marks() -> None:
    before, after = NODE_RANK.format(2) + " --x '<b>&'", NODE_RANK.format(1) + " --x '<b>&'"
    code = fix_code(before, after, "shell")
    assert plain(code.before) == before and plain(code.after) == after  # copied, the command is unchanged
    assert "<b>" not in code.before and "&lt;b&gt;&amp;" in code.before
    assert plain(re.search(r'<del class="a chg">(.*?)</del>', code.before).group(1)) == "--node-rank 2"  # type: ignore[union-attr]
    assert plain(re.search(r'<ins class="a chg">(.*?)</ins>', code.after).group(1)) == "--node-rank 1"  # type: ignore[union-attr]
    assert code.single_line and code.changes == (Change("--node-rank 2", "--node-rank 1"),)
    # each argument is one box, so a line breaks between arguments: "--tensor-parallel-size 8" stays whole
    assert '<span class="a">--tensor-parallel-size<span class="w"> </span><span class="m">8</span></span>' in code.before


class _Classes(HTMLParser):
    """Each character of highlighted code with the class of the innermost highlighting span."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.chars: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        cls = dict(attrs).get("class") or ""
        self.stack.append("" if cls in ("w", "a", "a chg") else cls)

    def handle_endtag(self, tag: str) -> None:
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        cls = next((c for c in reversed(self.stack) if c), "")
        self.chars += [(c, cls) for c in data]


def classes(markup: str) -> list[tuple[str, str]]:
    parser = _Classes()
    parser.feed(markup)
    return parser.chars


def test_the_highlighting_is_pygments_own() -> None:
    """Each character has the class Pygments' HtmlFormatter gives it, so the site's code colours apply."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    code = 'from vllm import LLM\nllm = LLM(model="m", max_loras=2)  # two words\nx = [1, -2]'
    ours = marked_html(code, "python", arguments(code, "python"), tuple(arguments(code, "python")[-2:]), "del")
    theirs = highlight(code, PythonLexer(), HtmlFormatter(nowrap=True)).rstrip("\n")
    assert classes(ours) == classes(theirs) and plain(ours) == code
