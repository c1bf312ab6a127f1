"""An error's title in lists and headings: its placeholders marked, vLLM's backtick quotes as code,
everything escaped; lists "by title" sort by the first word, not by the quotes before it."""

from __future__ import annotations

from kb.records.present import title_key
from kb.site.render import environment, title_html


def test_placeholders_are_marked_and_backticks_become_code() -> None:
    html = str(title_html("`--decode-context-parallel-size` ({decode_context_parallel_size}) exceeds the maximum…"))
    assert html == ('<code>--decode-context-parallel-size</code> (<var class="ph">{decode_context_parallel_size}</var>)'
                    " exceeds the maximum…")


def test_a_placeholder_inside_backticks_stays_marked_inside_the_code() -> None:
    assert str(title_html("`{executor_backend}` does not support async scheduling yet.")) == (
        '<code><var class="ph">{executor_backend}</var></code> does not support async scheduling yet.')


def test_a_backtick_with_no_partner_stays_text() -> None:
    """A title cut at its end keeps its lone quote as a character, never an unclosed element."""
    assert str(title_html("`a` and `b…")) == "<code>a</code> and `b…"


def test_backticks_inside_a_placeholder_are_the_placeholder_s() -> None:
    html = str(title_html("x {f'`{y}`' if y else ''} `z`"))
    assert html == "x <var class=\"ph\">{f&#39;`{y}`&#39; if y else &#39;&#39;}</var> <code>z</code>"


def test_everything_from_the_source_is_escaped() -> None:
    html = str(title_html("<script>alert(1)</script> `<b>` {a<b}"))
    assert "<script>" not in html and "<b>" not in html
    assert html == ('&lt;script&gt;alert(1)&lt;/script&gt; <code>&lt;b&gt;</code> <var class="ph">{a&lt;b}</var>')


def test_the_filter_is_what_the_templates_use() -> None:
    rendered = environment().from_string("{{ t|error_title }}").render(t="`x` {y}")
    assert rendered == '<code>x</code> <var class="ph">{y}</var>'


def test_titles_sort_by_their_first_word() -> None:
    titles = ["`top_logprobs` must be positive.", "'mm_encoder' requires x", "--api-server-count=1 cannot",
              "{executor_backend} does not", "Bfloat16 is only supported", "attention heads must"]
    assert sorted(titles, key=title_key) == ["--api-server-count=1 cannot", "attention heads must",
                                             "Bfloat16 is only supported", "{executor_backend} does not",
                                             "'mm_encoder' requires x", "`top_logprobs` must be positive."]
