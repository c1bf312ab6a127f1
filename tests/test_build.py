from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from kb.records.merge import attach_set_by, build_records
from kb.site.build import BuildOptions, build_site
from kb.site.linkcheck import broken_links
from sitehelpers import build_fixture, fixture_scan, index_json

DCP = "d97d5d8528e2b364"
RECORD_SCHEMA = json.loads((Path(__file__).parent.parent / "kb/schemas/record.schema.json").read_text())
ERRLOOKUP_FIELDS = ("id repo slug errorCode errorMessage messagePattern errorType errorClass httpStatus severity filePath "
                    "lineNumber sourceCode sourceCodeStart sourceCodeEnd githubUrl documentation triggerScenarios "
                    "commonSituations solutions exampleFix handlingStrategy validationCode typeGuard tryCatchPattern "
                    "preventionTips tags analyzedSha analyzedAt schemaVersion").split()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out, _ = build_fixture(tmp_path_factory.mktemp("b"), site_url="https://errors.example.org")
    return out


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_one_page_and_record_per_id(site: Path) -> None:
    index = json.loads((site / "api/errors/index.json").read_text())
    ids = [row["id"] for row in index["errors"]]
    assert len(ids) == 8 and DCP in ids
    for ident in ids:
        assert (site / f"errors/{ident}/index.html").is_file()
        record = (site / f"api/errors/{ident}").read_bytes()
        assert not (site / f"api/errors/{ident}.json").exists()  # each record is written once
        data = json.loads(record)
        jsonschema.validate(data, RECORD_SCHEMA)
        assert set(ERRLOOKUP_FIELDS) <= set(data)
    assert json.loads((site / "api/schema.json").read_text()) == RECORD_SCHEMA


def test_record_is_errlookup_compatible_and_factual(site: Path) -> None:
    r = json.loads((site / f"api/errors/{DCP}").read_text())
    assert r["id"] == DCP and r["repo"] == "vllm-project/vllm" and r["schemaVersion"] == 2
    assert r["errorMessage"].startswith("The model's number of query heads per KV head ({num_q_per_kv})")
    assert r["filePath"] == "vllm/config/model.py" and r["lineNumber"] == 23
    # the lines a page shows: from the outer `if` of its guard (19), with the local it reads, to the raise's end (28)
    assert r["sourceCodeStart"] == 19 and r["sourceCodeEnd"] == 28 and len(r["sourceCode"].split("\n")) == 10
    assert r["sourceCode"].split("\n")[0].strip() == "if decode_context_parallel_size > 1 and not self.use_mla:"
    assert r["kb"]["sites"][0]["excerptStart"] == 5 and r["kb"]["sites"][0]["excerptEnd"] == 39  # what the scan kept
    assert r["githubUrl"] == "https://github.com/vllm-project/vllm/blob/v0.1.0/vllm/config/model.py#L23"
    # nothing curated, and this tree has no `vllm serve` parser to follow names to: nothing to say, no placeholder
    assert r["documentation"] is None and r["commonSituations"] is None and r["kb"]["derived"] is None
    assert r["triggerScenarios"].startswith(
        "Raised in ModelConfig.verify_with_parallel_config when num_q_per_kv % decode_context_parallel_size != 0, "
        "inside: decode_context_parallel_size > 1 and not self.use_mla.")
    assert r["solutions"] == [] and r["exampleFix"] is None and r["handlingStrategy"] is None
    assert r["kb"]["curated"] is False and r["analyzedSha"] == "0123abcd"

    pattern = re.compile(r["messagePattern"])
    message = ("The model's number of query heads per KV head (6) must be divisible by "
               "`--decode-context-parallel-size` (4) for GQA/MQA.")
    assert pattern.match(message).groups() == ("6", "4")


def test_error_page_has_every_section_of_the_reference(site: Path) -> None:
    html = (site / f"errors/{DCP}/index.html").read_text()
    for needle in [
        "vllm-project/vllm · error · ValueError",
        "<h2>Error message</h2>", '<var class="ph">{num_q_per_kv}</var>', "Highlighted parts such as",

        'slug <code>the-model-s-number-of-query-heads-per-kv-head</code>',
        "<h2>What sets this</h2>", 'href="../../about/#set-by"',
        "<h2>Source</h2>", "Thrown at <code>vllm/config/model.py:23</code> in <code>ModelConfig.verify_with_parallel_config</code>",
        'href="https://github.com/vllm-project/vllm/blob/v0.1.0/vllm/config/model.py#L23">View on GitHub (pinned to v0.1.0)',
        "<h2>When it happens</h2>", "<h3>Trigger</h3>", "<h2>Related errors</h2>",
        "Raised when <code>num_q_per_kv % decode_context_parallel_size != 0</code>, inside: "
        "<code>decode_context_parallel_size &gt; 1 and not self.use_mla</code>",
        "<code>num_q_per_kv = total_num_attention_heads // total_num_kv_heads</code>",
        "Data as JSON:", f'href="../../api/errors/{DCP}"', "Report an issue",
        "https://github.com/vllm-error-kb/vllm-error-kb/issues/new?",
        '<meta name="robots" content="noindex">',  # facts only: not offered to search engines
    ]:
        assert needle in html, needle
    # a section with nothing to say is left out: never a placeholder
    for gone in ("Not curated", "<h2>What it means</h2>", "<h2>Solutions</h2>", "<h2>Example fix</h2>",
                 "<h2>Defensive patterns</h2>", "<h2>Prevention</h2>", "<h3>Common situations</h3>"):
        assert gone not in html, gone
    # the excerpt (the guard's outer `if` .. the raise's end) with the raise lines highlighted, numbered
    # from 19 by a CSS counter
    assert html.count('<span class="r h">') == 6 and html.count('<span class="r') == 10
    assert '<code style="counter-reset:ln 18">' in html
    # "What sets this" does not repeat the trigger where following names changed nothing in it
    assert html.count("num_q_per_kv % decode_context_parallel_size != 0</code>") == 1
    # related: the sibling in the same function first
    related = html[html.index("<h2>Related errors</h2>"):]
    assert related.index("Total number of attention heads") < related.index("max_model_len")


def test_pydantic_wrapped_errors_say_so(site: Path) -> None:
    r = json.loads((site / "api/errors/index.json").read_text())
    ident = next(e["id"] for e in r["errors"] if e["message"].startswith("max_model_len must be non-negative"))
    html = (site / f"errors/{ident}/index.html").read_text()
    assert "reaches you wrapped" in html and "field_validator" in html


def test_scanned_text_is_escaped(site: Path) -> None:
    index = json.loads((site / "api/errors/index.json").read_text())
    ident = next(e["id"] for e in index["errors"] if "<script>" in e["message"])
    html = (site / f"errors/{ident}/index.html").read_text()
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; bad" in html


def test_no_broken_links_and_lean_pages(site: Path) -> None:
    assert broken_links(site) == []
    for page in site.rglob("*.html"):
        assert page.stat().st_size < 50_000, page
        assert "http://" not in page.read_text().replace("http://www.sitemaps.org", "")  # no external requests
    html = (site / "index.html").read_text()
    assert "0 of 8 errors curated" in html and 'action="search/"' in html


def test_slugs_and_site_files(site: Path) -> None:
    index = json.loads((site / "api/errors/index.json").read_text())
    row = next(e for e in index["errors"] if e["id"] == DCP)
    # a slug has no page of its own: /api/slugs.json maps it, and the 404 page's script goes there
    assert not (site / f"errors/{row['slug']}").exists()
    slugs = json.loads((site / "api/slugs.json").read_text())
    assert slugs[row["slug"]] == DCP and len(slugs) == len(index["errors"])
    assert set(slugs.values()) == {e["id"] for e in index["errors"]}
    assert 'lookup("api/slugs.json", name)' in (site / "404.html").read_text()
    assert (site / "robots.txt").read_text() == "User-agent: *\nAllow: /\nSitemap: https://errors.example.org/sitemap.xml\n"
    # pages without curated or derived guidance are noindex and left out of the sitemap
    assert f"<loc>https://errors.example.org/errors/{DCP}/</loc>" not in (site / "sitemap.xml").read_text()
    assert "<loc>https://errors.example.org/about/</loc>" in (site / "sitemap.xml").read_text()
    match = index_json(site, "match-index")
    entry = next(e for e in match["entries"] if e["id"] == DCP)
    assert entry["parts"][0] == "The model's number of query heads per KV head (" and entry["names"] == [
        "num_q_per_kv", "decode_context_parallel_size"]


def test_no_sitemap_without_site_url(tmp_path: Path) -> None:
    out, _ = build_fixture(tmp_path)
    assert not (out / "sitemap.xml").exists()
    assert (out / "robots.txt").read_text() == "User-agent: *\nAllow: /\n"


def test_builds_are_byte_identical(tmp_path: Path) -> None:
    a, _ = build_fixture(tmp_path / "a", site_url="https://x.example")
    b, _ = build_fixture(tmp_path / "b", site_url="https://x.example")
    assert files_of(a) == files_of(b)


def test_warm_rebuild_rewrites_nothing(tmp_path: Path) -> None:
    out, first = build_fixture(tmp_path)
    inodes = {p: p.stat().st_ino for p in out.rglob("*") if p.is_file() and p.name != ".kb-build.json.gz"}
    _, second = build_fixture(tmp_path, out=out)
    assert second.pages_rendered == 0 and second.files_written == 0
    assert {p: p.stat().st_ino for p in out.rglob("*") if p.is_file() and p.name != ".kb-build.json.gz"} == inodes
    # one changed source file re-renders only its own pages
    _, third = build_fixture(tmp_path, out=out, extra={"vllm/entrypoints/evil.py": "def f():\n    raise ValueError('changed')\n"})
    assert third.pages_rendered == 1


def test_failed_build_leaves_previous_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out, _ = build_fixture(tmp_path)
    before = files_of(out)
    import kb.site.build as build_module

    def boom(*a, **k):
        raise RuntimeError("template exploded")

    monkeypatch.setattr(build_module, "home_page", boom)
    result = fixture_scan(tmp_path / "tree2")
    with pytest.raises(RuntimeError):
        build_site(result, BuildOptions(out, jobs=1), attach_set_by(build_records(result), result.config))
    assert files_of(out) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_parallel_render_matches_serial(tmp_path: Path) -> None:
    result = fixture_scan(tmp_path / "tree")
    build_site(result, BuildOptions(tmp_path / "one", jobs=1), attach_set_by(build_records(result), result.config))
    build_site(result, BuildOptions(tmp_path / "two", jobs=2), attach_set_by(build_records(result), result.config))
    assert files_of(tmp_path / "one") == files_of(tmp_path / "two")


def test_link_checker_finds_what_is_broken(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "a").mkdir(parents=True)
    (site / "a/index.html").write_text('<p id="here">x</p><a href="../b/">b</a><a href="#here">ok</a>')
    (site / "b").mkdir()
    (site / "b/index.html").write_text(
        '<a href="../a/#here">ok</a><a href="../a/#gone">anchor</a><a href="../missing/">missing</a>'
        '<a href="/a/">root</a><a href="../../outside.html">out</a><a href="https://x.org/">ext</a>'
        '<img src="../a/index.html?x=1&amp;y=2">')
    assert broken_links(site) == [
        "b/index.html: ../a/#gone (no such anchor)", "b/index.html: ../missing/",
        "b/index.html: /a/ (root-absolute: breaks under a sub-path)", "b/index.html: ../../outside.html"]


def test_llms_txt_and_json_ld_of_every_error_page(tmp_path: Path) -> None:


    from entryhelpers import DCP_ENTRY, write_entries
    from kb.entries.load import load_entries
    from kb.records.merge import merge

    result = fixture_scan(tmp_path / "tree")
    records = merge(result, load_entries(write_entries(tmp_path / "errors", {"dcp.yaml": DCP_ENTRY})).entries).records
    site = tmp_path / "site"
    build_site(result, BuildOptions(site, site_url="https://kb.example", jobs=1), attach_set_by(records, result.config))
    llms = (site / "llms.txt").read_text()
    assert llms.startswith("# vLLM Error KB: vLLM 0.1.0\n") and "https://kb.example/api/errors/index.json" in llms
    assert "(https://kb.example/errors/d97d5d8528e2b364/)" in llms  # a curated error, linked
    pages = list((site / "errors").glob("*/index.html"))
    evil = None
    for page in pages:
        html = page.read_text()
        m = re.search(r'<script type="application/ld\+json">(.*?)</script>', html, re.S)
        if m is None:
            continue  # a slug's redirect page
        assert "<" not in m.group(1) and ">" not in m.group(1)  # nothing the message holds can close the element
        data = json.loads(m.group(1))
        assert data["@type"] == "TechArticle" and data["url"] == f"https://kb.example/errors/{data['identifier']}/"
        if "<script>alert" in data["headline"]:
            evil = data
    assert evil is not None  # the hostile message survived as text, escaped


def test_a_family_is_explained_once_on_each_member_page_with_links_to_its_siblings(tmp_path: Path) -> None:
    from entryhelpers import (
        DCP_ENTRY,
        DCP_MAX,
        DCP_MAX_ENTRY,
        DCP_MAX_FILE,
        DCP_MAX_ID,
        FAMILY_EXPLANATION,
        family_yaml,
        write_entries,
        write_family,
    )
    from kb.entries.load import load_entries
    from kb.mkdocs.pages import error_markdown
    from kb.records.merge import merge
    from kb.site.api import SiteInfo
    from kb.site.views import error_view, family_ids, summary

    result = fixture_scan(tmp_path / "tree", {DCP_MAX_FILE: DCP_MAX})
    errors = write_entries(tmp_path / "errors", {"dcp.yaml": DCP_ENTRY, "max.yaml": DCP_MAX_ENTRY})
    write_family(errors, "dcp-checks.yaml", family_yaml([DCP_MAX_ID, DCP]))
    records = merge(result, load_entries(errors).entries).records
    site = tmp_path / "site"
    build_site(result, BuildOptions(site, jobs=1), attach_set_by(records, result.config))
    words = FAMILY_EXPLANATION.split()[:6]
    for me, sibling in ((DCP, DCP_MAX_ID), (DCP_MAX_ID, DCP)):
        html = (site / f"errors/{me}/index.html").read_text()
        assert html.count('<section id="family">') == 1 and html.count(" ".join(words)) == 1  # shown once
        section = html.split('<section id="family">')[1].split("</section>")[0]
        assert "<h2>How this family works</h2>" in section and "one of 2 with one mechanism" in section
        assert f'href="../../errors/{sibling}/"' in section and f'href="../../errors/{me}/"' not in section
        assert "(this page)" in section
        record = json.loads((site / f"api/errors/{me}").read_text())
        jsonschema.validate(record, RECORD_SCHEMA)
        assert record["kb"]["family"] == {"slug": "dcp-checks", "title": "DCP checks", "explanation": FAMILY_EXPLANATION + "\n",
                                          "members": [DCP_MAX_ID, DCP]}
    assert broken_links(site) == []
    outside = json.loads((site / "api/errors/index.json").read_text())["errors"]
    plain = next(row["id"] for row in outside if row["id"] not in (DCP, DCP_MAX_ID))
    assert json.loads((site / f"api/errors/{plain}").read_text())["kb"]["family"] is None
    assert '<section id="family">' not in (site / f"errors/{plain}/index.html").read_text()

    by_id = {r.id: r for r in records}  # the MkDocs twin: the same view model, as Markdown
    summaries = {i: summary(r) for i, r in by_id.items()}
    r = by_id[DCP]
    view = error_view(r, SiteInfo(result.tree), [summaries[i] for i in r.related], [summaries[i] for i in family_ids(r)])
    page = error_markdown(view, SiteInfo(result.tree), {i: x.title for i, x in by_id.items()}, "../")
    assert page.count("## How this family works") == 1
    family_part = page.split("## How this family works")[1].split("\n## ")[0]
    assert f"]({DCP_MAX_ID}.md)" in family_part and "(this page)" in family_part and " ".join(words) in family_part


def test_the_manifest_is_gzipped_and_an_older_plain_one_is_still_used(tmp_path: Path) -> None:
    import gzip

    out, first = build_fixture(tmp_path)
    manifest = json.loads(gzip.decompress((out / ".kb-build.json.gz").read_bytes()))
    assert manifest["format"] == "kb-build/2" and not (out / ".kb-build.json").exists()
    assert all(len(k) == 32 for k in manifest["keys"].values())
    assert f"errors/{DCP}/index.html" in manifest["keys"]
    # a site an older kb built: a plain .kb-build.json with full keys; it is still recognised and reused
    full = {p: k * 2 for p, k in manifest["keys"].items()}  # 64 hex digits whose first 32 are this build's
    (out / ".kb-build.json.gz").unlink()
    (out / ".kb-build.json").write_text(json.dumps({"format": "kb-build/1", "keys": full}))
    _, again = build_fixture(tmp_path, out=out)
    assert again.files_kept == first.files_written and again.files_written == 0 and again.pages_rendered == 0
    assert (out / ".kb-build.json.gz").is_file() and not (out / ".kb-build.json").exists()


def test_a_damaged_manifest_means_a_full_build_not_a_failure(tmp_path: Path) -> None:
    import gzip

    out, first = build_fixture(tmp_path)
    packed = bytearray(gzip.compress(b'{"format": "kb-build/2", "keys": {"a": "b"}}' * 200, mtime=0))
    packed[40:60] = bytes(20)  # a deflate stream zlib cannot read
    for damaged in (bytes(packed), b"\x1f\x8b not gzip", b""):
        (out / ".kb-build.json.gz").write_bytes(damaged)
        _, again = build_fixture(tmp_path, out=out)
        assert again.files_kept == 0 and again.files_written == first.files_written
    assert not list(tmp_path.glob(".site.building-*"))


def test_the_home_page_names_every_class_and_pages_have_an_icon(site: Path) -> None:
    """A newcomer's first look (#32): the home page does not claim only ValueError, and no page asks
    the host for a missing /favicon.ico (each links the site's icon); flag counts: tests/test_sets.py."""
    home = (site / "index.html").read_text()
    assert "Every <code>ValueError</code>" not in home and "<code>RuntimeError</code>" in home
    assert (site / "static/favicon.svg").read_text().startswith("<svg")
    for page in (site / "index.html", *sorted(site.glob("errors/*/index.html"))[:3]):
        html = page.read_text()
        assert '<link rel="icon" href="' in html and 'static/favicon.svg"' in html, page
    assert re.search(r'<footer class="site">.*href="(\./)?about/"', home, re.S)  # /about/ is linked from every footer
