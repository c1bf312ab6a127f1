"""A hostile tree and a hostile curated entry through `mkdocs build --strict`: every piece of
scanned or curated text reaches the pages escaped for its context, and nothing loads from
another site."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from entryhelpers import MEANING, write_entries
from fixture_tree import tree_files, write_tree
from kb.entries.markdown import problems_in, to_html
from kb.mkdocs.pages import code, front_matter_string, md_text, prose, prose_list
from kb.scan.ids import error_id
from test_mkdocs import mkdocs_build

pytest.importorskip("material")

IMG = "<img src=x onerror=alert(1)>"
VERSION = f'__version__ = "0.1.0) [v](javascript:alert(1)) {IMG}\\n\\n{IMG}"\n'
HOSTILE_PY = f'''
def guard(x):
    if x == "`{IMG}`":
        raise ValueError("guarded: `{IMG}` and `` ` ``")


def triple(x):
    if x == """a

{IMG}""":
        raise ValueError("triple-quoted guard")


def contexts(items):
    for item in "`{IMG}`":
        with open("`{IMG}`") as f:
            raise ValueError(f"in a loop {{item}}")


def local(x):
    y = "`{IMG}`" + """

{IMG}"""
    if x == y:
        raise ValueError("a local " + y)
'''
NEWLINE_FILE = f"vllm/new `` ` {IMG}.py"  # a name with a newline is not scanned at all (tests/test_hostile_scan.py)
PAREN_FILE = f"vllm/a) # [x](javascript:alert(1)/{IMG}.py"
GUARD_ID = error_id(f"guarded: `{IMG}` and `` ` ``", "vllm/hostile.py")
CURATED = f'''
id: {GUARD_ID}
meaning: |
  {MEANING}
  An attribute list, which the docs' attr_list extension would apply:
  {{: onclick="alert(1)" }}
solutions:
  - 'A double backslash then code: \\\\`{IMG}`'
  - "[An absolute link](//example.invalid/x)"
prevention:
  - "Code: ``{IMG}``"
trigger: |
  `a` {{: onmouseover="alert(1)" }}
example_fix:
  language: shell
  model_config:
    num_attention_heads: "1\\n\\n{IMG}\\n\\n`{IMG}`"
    "key\\n\\n{IMG}": 2
  before: "vllm serve m\\n````\\n{IMG}"
  after: vllm serve m --x
defensive:
  strategy: validation
  title: "A title \\n\\n{IMG} `x`"
  code: "```\\n{IMG}\\n```"
no_check: "only a test"
'''


class Elements(HTMLParser):
    """Every start tag of a page with its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))


def injected(html: str) -> list[str]:
    """Elements or attributes that hostile text could have put in: event handlers, images,
    script or data URLs, or anything loaded from another site."""
    parser = Elements()
    parser.feed(html)
    out = []
    for tag, attrs in parser.tags:
        for name, value in attrs.items():
            url = "".join(value.split()).lower()
            if name.startswith("on") or url.startswith(("javascript:", "data:", "vbscript:")):
                out.append(f"<{tag} {name}={value!r}>")
        if tag == "img" or (tag in ("script", "iframe", "link") and "//" in attrs.get("src", attrs.get("href", ""))
                            and tag != "link"):
            out.append(f"<{tag} {attrs}>")
    return out


def hostile_site(tmp_path: Path, extensions: str = "") -> Path:
    files = tree_files("0.1.0", broken=False) | {"vllm/_version.py": VERSION, "vllm/hostile.py": HOSTILE_PY,
                                                 NEWLINE_FILE: 'def f():\n    raise ValueError("from a file with a newline")\n',
                                                 PAREN_FILE: 'def g():\n    raise ValueError("from a folder with a paren")\n'}
    tree = write_tree(tmp_path / "tree", files)
    entries = write_entries(tmp_path / "errors", {"hostile.yaml": CURATED})
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/index.md").write_text("# Docs\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text(f"""site_name: vLLM
theme:
  name: material
  font: false
{extensions}plugins:
  - search
  - vllm-errors:
      source: {tree}
      errors: {entries}
      include: all
""")
    return config


def test_hostile_tree_and_entry_inject_nothing(tmp_path: Path) -> None:
    proc = mkdocs_build(hostile_site(tmp_path))
    assert proc.returncode == 0, proc.stderr
    found = {str(p.relative_to(tmp_path / "site")): injected(p.read_text(encoding="utf-8"))
             for p in sorted((tmp_path / "site").rglob("*.html"))}
    assert {page: bad for page, bad in found.items() if bad} == {}
    page = (tmp_path / f"site/errors/{GUARD_ID}/index.html").read_text(encoding="utf-8")
    assert "&lt;img src=x onerror=alert(1)&gt;" in page  # shown as text
    for message, file in [("from a file with a newline", NEWLINE_FILE), ("from a folder with a paren", PAREN_FILE),
                          ("triple-quoted guard", "vllm/hostile.py"), ("in a loop {item}", "vllm/hostile.py")]:
        assert (tmp_path / f"site/errors/{error_id(message, file)}/index.html").is_file(), message
    assert "All errors by subsystem" in (tmp_path / "site/errors/index.html").read_text(encoding="utf-8")


REFUSED_BY_THE_LOADER = [f"\\`{IMG}\\`", "[x](javascript:alert(1))", "[x]( JaVaScRiPt:alert(1))",
                         "![x](https://example.invalid/t.png)", "![x](//example.invalid/t.png)", f"<div>\n\n{IMG}\n</div>",
                         f"a\n\n{IMG}\n\nb", "x\n{: onclick=\"alert(1)\" }"]


@pytest.mark.parametrize("text", REFUSED_BY_THE_LOADER)
def test_prose_is_rendered_safe_even_past_the_loader(text: str) -> None:
    """The pages render curated prose with kb's renderer, so even text the loader would refuse
    gives no element, attribute or request of its own; and no line of it starts a Markdown block."""
    for one_line in (prose(text), prose_list([text], "ol")):
        assert injected(one_line) == [] and "\n" not in one_line
    assert injected(to_html(text)) == []  # the standalone site's


def test_spans_stay_on_one_line_and_the_title_is_yaml() -> None:
    assert code(f"a\n\n{IMG}\r\n`b`") == f"`` a {IMG} `b` ``"
    assert md_text(f"t\n\n# {IMG}\u2028x\x00") == "t \\# &lt;img src=x onerror=alert\\(1\\)&gt; x\ufffd"
    title = 'emoji 😀, "quotes", back\\slash, \x85 and \t'
    assert yaml.safe_load(f"title: {front_matter_string(title)}") == {"title": title}
    assert front_matter_string(title).isascii()


def test_deep_markdown_leaves_the_inspector_usable() -> None:
    assert problems_in("1. " * 1600, "trigger") == ["trigger nests lists or quotes too deeply (more than 20 elements)"]
    assert problems_in(f"\\`{IMG}\\`", "meaning") == [
        f"raw HTML in markdown (meaning): {IMG} (use backticks or plain text)"]


SNIPPET_PY = '''
def s(x):
    doc = """
--8<-- "secret.txt"
  ;--8<-- 'secret.txt'
--8<--
secret.txt
--8<--
# --8<-- [start:kept]
"""
    raise ValueError("a snippet")
'''


def test_scanned_lines_never_act_as_snippets(tmp_path: Path) -> None:
    """vLLM's docs use pymdownx.snippets, which reads every line first, fenced code too."""
    config = hostile_site(tmp_path, "markdown_extensions:\n  - pymdownx.snippets:\n      base_path: ['.']\n")
    (tmp_path / "tree/vllm/snip.py").write_text(SNIPPET_PY.lstrip(), encoding="utf-8")
    (tmp_path / "secret.txt").write_text("TOP-SECRET\n")
    proc = mkdocs_build(config)
    assert proc.returncode == 0, proc.stderr
    assert [p for p in (tmp_path / "site").rglob("*") if p.is_file() and b"TOP-SECRET" in p.read_bytes()] == []
    ident = error_id("a snippet", "vllm/snip.py")
    page = (tmp_path / f"site/errors/{ident}/index.html").read_text(encoding="utf-8")
    shown = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert SNIPPET_PY.strip() in shown  # every line of the excerpt as written
