"""The `vllm-errors` MkDocs plugin on a small Material site over the fixture tree."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from entryhelpers import DCP_ENTRY, DCP_ID, DCP_MAX, DCP_MAX_ENTRY, DCP_MAX_FILE, DCP_MAX_ID, write_entries
from fixture_tree import tree_files, write_tree

pytest.importorskip("material")


def site(tmp_path: Path, include: str = "curated", extra: str = "", nav: bool = False) -> Path:
    tree = write_tree(tmp_path / "tree", tree_files("0.1.0", broken=False) | {DCP_MAX_FILE: DCP_MAX})
    entries = write_entries(tmp_path / "errors", {"dcp.yaml": DCP_ENTRY, "max.yaml": DCP_MAX_ENTRY})
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# vLLM docs\n\nSee the [error reference](errors/index.md).\n")
    config = tmp_path / "mkdocs.yml"
    nav_block = "nav:\n  - Home: index.md\n" if nav else ""
    config.write_text(f"""site_name: vLLM
theme:
  name: material
  palette:
    - scheme: default
    - scheme: slate
{nav_block}plugins:
  - search
  - vllm-errors:
      source: {tree}
      errors: {entries}
      include: {include}
{extra}""")
    return config


def mkdocs_build(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d",
                           str(config.parent / "site")], capture_output=True, text=True, cwd=config.parent)


@pytest.mark.parametrize("explicit_nav", [False, True])
def test_curated_pages_nav_and_api(tmp_path: Path, explicit_nav: bool) -> None:
    config = site(tmp_path, nav=explicit_nav)
    proc = mkdocs_build(config)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "site"
    page = (out / f"errors/{DCP_ID}/index.html").read_text()
    for needle in ["Error message", "What it means", "Thrown at", "View on GitHub (pinned to v0.1.0)", "Solutions",
                   "Example fix", "When it happens", "Related errors", "Data as JSON", 'class="kb-fix"', 'class="hll"']:
        assert needle in page, needle
    # the entry has no defensive patterns, prevention or situations: those sections are left out, never a placeholder
    for gone in ("Not curated", "Defensive patterns", "Prevention", "Common situations"):
        assert gone not in page, gone
    assert not (out / "errors/f644a7c8e4fdc46c/index.html").exists()  # include: curated
    home = (out / "index.html").read_text()
    assert "Error reference" in home and f"errors/{DCP_ID}/" in home  # the nav section
    for ident in (DCP_ID, DCP_MAX_ID, "f644a7c8e4fdc46c"):  # the API has every error
        record = json.loads((out / f"api/errors/{ident}").read_text())
        assert record["id"] == ident and not (out / f"api/errors/{ident}.json").exists()  # written once
    assert (out / "api/match-index.json.gz").is_file() and (out / "search/search_index.json").is_file()
    config_doc = json.loads((out / "api/config.json").read_text())  # the configuration model, with its schema
    jsonschema.validate(config_doc, json.loads((out / "api/config.schema.json").read_text()))
    assert config_doc["release"] == "0.1.0"
    assert not (tmp_path / "docs/errors").exists()  # nothing written into the docs folder


def test_include_all_keeps_the_nav_small(tmp_path: Path) -> None:
    proc = mkdocs_build(site(tmp_path, include="all"))
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "site"
    assert (out / "errors/f644a7c8e4fdc46c/index.html").is_file()
    home = (out / "index.html").read_text()
    assert f"errors/{DCP_ID}/" in home and "errors/f644a7c8e4fdc46c/" not in home  # only curated pages in the nav
    assert "All errors by subsystem" in (out / "errors/index.html").read_text()


def test_bad_options_and_entries_are_plugin_errors(tmp_path: Path) -> None:
    config = site(tmp_path, extra="      git: /somewhere\n")
    proc = mkdocs_build(config)
    assert proc.returncode != 0
    assert "vllm-errors: give one of source, git, release, wheel (got source, git)" in proc.stderr
    config = site(tmp_path / "b")
    (tmp_path / "b/errors/bad.yaml").write_text("id: nothex\nmeaning: x\n")
    proc = mkdocs_build(config)
    assert proc.returncode != 0
    assert "errors/bad.yaml:1: id must be 16 lowercase hex characters (got 'nothex')" in proc.stderr


def test_scanned_text_is_escaped_in_pages_titles_and_nav(tmp_path: Path) -> None:
    from kb.scan.ids import error_id
    from sitehelpers import EVIL

    config = site(tmp_path, include="all")
    (tmp_path / "tree/vllm/entrypoints").mkdir(parents=True, exist_ok=True)
    (tmp_path / "tree/vllm/entrypoints/evil.py").write_text(EVIL)
    evil = error_id("<script>alert('x')</script> bad {x} & more", "vllm/entrypoints/evil.py")
    from entryhelpers import MEANING

    write_entries(tmp_path / "errors", {"evil.yaml": f"id: {evil}\nmeaning: {MEANING}\nno_check: only a test\n"})
    proc = mkdocs_build(config)
    assert proc.returncode == 0, proc.stderr
    for page in (tmp_path / "site").rglob("*.html"):
        assert "<script>alert" not in page.read_text(), page
    assert "&lt;script&gt;alert" in (tmp_path / f"site/errors/{evil}/index.html").read_text()


@pytest.mark.parametrize("path", [".", "./", "", "/", "..", "/errors", "a/../b", "a//b", "a\\b", "a\x00b", "a\nb",
                                  "api", "api/errors"])
def test_a_path_that_is_not_a_folder_inside_the_docs_is_a_config_error(tmp_path: Path, path: str) -> None:
    """`.` would put the index over the docs' home page, `api/errors` the pages over the API's files."""
    config = site(tmp_path, extra=f"      path: {json.dumps(path)}\n")
    proc = mkdocs_build(config)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "Aborted with a configuration error!" in proc.stdout + proc.stderr
    why = ("must not be inside api/, which holds the JSON API" if path.startswith("api") else
           "must be a folder inside the docs: names joined by '/', without '.', '..', a leading '/', a backslash or "
           "a control character")
    assert f"Config value 'plugins': Plugin 'vllm-errors' option 'path': {why} (got {path!r})" in proc.stderr
    assert not (tmp_path / "site").exists()


def test_the_pages_never_replace_a_page_of_the_docs(tmp_path: Path) -> None:
    config = site(tmp_path, extra="      path: guide\n")
    (tmp_path / "docs/guide").mkdir()
    (tmp_path / "docs/guide/index.md").write_text("# The docs' own guide\n")
    proc = mkdocs_build(config)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert ("vllm-errors: the docs already have guide/index.md, where the plugin puts its own (option 'path' is "
            "'guide'; the JSON API goes under api/)") in proc.stderr


HEADS_ID = "f644a7c8e4fdc46c"  # not curated: a page only with include: all


@pytest.mark.parametrize("include, directory_urls", [("curated", True), ("all", False)])
def test_the_pages_mark_the_fix_and_link_cited_ids_as_the_site_does(tmp_path: Path, include: str,
                                                                    directory_urls: bool) -> None:
    """The example fix as kb/site/fixdiff.py shows it (wrapped between arguments, the change struck
    out before and underlined after, said in words) and each raw error id cited in curated prose as
    a link to its page, named by its title (kb/entries/markdown.py), where it has a page here."""
    from html import unescape

    from kb.site.fixdiff import fix_code

    config = site(tmp_path, include=include, extra="" if directory_urls else "use_directory_urls: false\n")
    cited = DCP_ENTRY.replace("  - Set `--decode-context-parallel-size` to a divisor of the group size.\n",
                              f"  - Set `--decode-context-parallel-size` to a divisor of the group size; {DCP_MAX_ID} "
                              f"bounds it from above.\n  - Check `{HEADS_ID}` first.\n")
    write_entries(tmp_path / "errors", {"dcp.yaml": cited})
    proc = mkdocs_build(config)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "site"
    page_file = out / (f"errors/{DCP_ID}/index.html" if directory_urls else f"errors/{DCP_ID}.html")
    page = page_file.read_text()
    before = "vllm serve org/m --tensor-parallel-size 16 --decode-context-parallel-size 4"
    after = "vllm serve org/m --tensor-parallel-size 16 --decode-context-parallel-size 2"
    code = fix_code(before, after, "shell")  # the site's own markup, not a second rendering of it
    assert f'<code class="kb-cmd">{code.before}</code>' in page and f'<code class="kb-cmd">{code.after}</code>' in page
    assert '<del class="a chg">' in page and '<ins class="a chg">' in page and "tabbed-set" not in page
    assert (f'<p class="kb-changes">{code.note}</p>' in page and "<strong>Changed:</strong> <code>--decode-context-"
            "parallel-size 4</code> → <code>--decode-context-parallel-size 2</code>." in page)
    shown = [unescape(re.sub(r"<[^>]+>", "", m)) for m in re.findall(r'<code class="kb-cmd">(.*?)</code></pre>', page)]
    assert shown == [before, after]  # copied, the commands are the commands as written
    css = re.search(r'<link rel="stylesheet" href="([^"]*errors\.css)"', page)
    assert css and (page_file.parent / css.group(1)).resolve() == (out / "errors/errors.css").resolve()
    assert ".kb-fix del" in (out / "errors/errors.css").read_text()
    # the cited ids: a link named by the title, to a page that exists; an id without a page stays as written
    max_title = re.search(r"<title>(.*?) - vLLM</title>",
                          (out / (f"errors/{DCP_MAX_ID}/index.html" if directory_urls else
                                  f"errors/{DCP_MAX_ID}.html")).read_text()).group(1)
    link = re.search(rf'<a class="error-ref" href="([^"]+)" title="error {DCP_MAX_ID}">([^<]+)</a>', page)
    assert link and (page_file.parent / link.group(1)).resolve() in {(out / f"errors/{DCP_MAX_ID}/").resolve(),
                                                                     (out / f"errors/{DCP_MAX_ID}.html").resolve()}
    assert (page_file.parent / link.group(1) / ("index.html" if directory_urls else "")).is_file()
    assert unescape(link.group(2)) == unescape(max_title)  # its title, as its own page has it
    assert f"“{link.group(0)}”" in page  # quoted, as the site quotes it
    heads = re.search(rf'<a class="error-ref" href="([^"]+)" title="error {HEADS_ID}">', page)
    if include == "all":
        assert heads and (page_file.parent / heads.group(1)).is_file()
    else:
        assert heads is None and f"<code>{HEADS_ID}</code>" in page
