"""Derived guidance (kb/derived/): the condition of a raise in words over what users set, the
example fix kb finds and proves through `kb check`, and where they go: the error page (never a
placeholder, marked as derived), the API record (`kb.derived`), the Markdown page, the lookup's
index and the MCP tools (one answer), the sitemap and `noindex` (only pages that help are offered to
search engines), the canonical page of an older release's page. On the small vLLM-shaped tree of
tests/test_derive.py, whose flags, configs and checks kb reads as it reads vLLM's."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest

from kb.checks.launch_check import check_one
from kb.checks.predict import Prediction
from kb.checks.verify import fix_problems
from kb.derived import words as w
from kb.derived.attach import attach_derived, derive_guidance
from kb.derived.guidance import guidance
from kb.derived.simplify import simplify
from kb.explain.index import match_index
from kb.jobs import scan_release
from kb.model import ExampleFix, Record, ScanResult
from kb.records.merge import attach_set_by, build_records
from kb.scan.source import SourceSpec
from kb.site.api import SiteInfo, api_record
from kb.site.build import BuildOptions, build_site
from kb.site.views import error_view, live_pages
from test_derive import ARG_UTILS_DERIVE, PARALLEL_DERIVE
from test_sets import dcp_tree

RECORD_SCHEMA = json.loads((Path(__file__).parent.parent / "kb/schemas/record.schema.json").read_text())
EP = "expert parallel caps tp at 4, got {self.tensor_parallel_size}"
INTERNAL = "needs the internal thing"
LORA = "at most 4 LoRAs"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> ScanResult:
    root = dcp_tree(tmp_path_factory.mktemp("derived") / "tree")
    (root / "vllm/config/parallel.py").write_text(PARALLEL_DERIVE)
    (root / "vllm/engine/arg_utils.py").write_text(ARG_UTILS_DERIVE)
    return scan_release(SourceSpec(source_dir=str(root)), use_cache=False)


def by_template(records, template: str):  # type: ignore[no-untyped-def]
    return next(r for r in records if r.template == template)


# --- words ---------------------------------------------------------------------------------------------
def said(expr: str, **labels: w.Label) -> str:
    return w.Words(labels).condition(simplify(ast.parse(expr, mode="eval").body, {}))


def test_a_condition_reads_as_words_over_what_users_set() -> None:
    tp, ep = w.Label("--tensor-parallel-size", w.FLAG), w.Label("--enable-expert-parallel", w.FLAG, switch=True)
    heads = w.Label("num_attention_heads", w.CONFIG_JSON)
    assert said("ep and tp > 4", tp=tp, ep=ep) == \
        "`--enable-expert-parallel` is on and `--tensor-parallel-size` is greater than 4"
    assert said("not ep or heads % tp != 0", tp=tp, ep=ep, heads=heads) == \
        "`--enable-expert-parallel` is off or `num_attention_heads` in config.json is not a multiple of `--tensor-parallel-size`"
    spec = w.Label("--spec-model", w.FLAG, optional=True)
    tokens = w.Label("--spec-tokens", w.FLAG, optional=True)
    method = w.Label("--spec-method", w.FLAG)
    assert said("spec is not None and tokens is None and method not in ('ngram', 'suffix')",
                spec=spec, tokens=tokens, method=method) == (
        "`--spec-model` is given and `--spec-tokens` is not given and `--spec-method` is not one of `ngram`, `suffix`")
    temp = w.Label("temperature", w.REQUEST)
    assert said("not 0.0 <= t <= 2.0", t=temp) == "the request's `temperature` is not at least 0.0 and at most 2.0"
    # De Morgan: what makes `not (a and b)` hold
    assert said("not (ep and tp > 4)", tp=tp, ep=ep) == \
        "`--enable-expert-parallel` is off or `--tensor-parallel-size` is at most 4"
    # what has no words is quoted as code, with users' names in it
    assert said("f(tp) > 1", tp=tp) == "`f(--tensor-parallel-size)` is greater than 1"
    with pytest.raises(w.TooComplex):
        said("f(" + " + ".join(["tp"] * 60) + ") > 1", tp=tp)


def test_constant_parts_are_worked_out_before_the_words() -> None:
    node = simplify(ast.parse("not (True is not None and False) and (True if a else None) is not None and b",
                              mode="eval").body, {})
    assert ast.unparse(node) == "a and b"
    assert ast.unparse(simplify(ast.parse("x in v and y", mode="eval").body, {"v": ("a", "b")})) == \
        "x in ('a', 'b') and y"
    assert ast.unparse(simplify(ast.parse("(x or 1) > 2", mode="eval").body, {})) == "(x or 1) > 2"  # a value, kept


# --- the derived guidance of each error ------------------------------------------------------------------
def test_each_error_kb_can_reason_about_gets_its_condition_in_words_and_a_proved_fix(tree: ScanResult) -> None:
    records = build_records(tree)
    found = derive_guidance(records, tree.config)
    ep = by_template(records, EP)
    g = found[ep.id]
    assert g.meaning == ("vLLM raises this in `ParallelConfig.__post_init__` when `--enable-expert-parallel` is on "
                         "and `--tensor-parallel-size` is greater than 4.")
    assert g.inputs == ("What it reads: `--enable-expert-parallel`, a switch of `vllm serve` (off by default); "
                        "`--tensor-parallel-size`, a flag of `vllm serve` (default `1`).")
    assert g.reading == "check" and g.fix is not None and not g.no_fix
    assert (g.fix.before, g.fix.after) == ("vllm serve MODEL --enable-expert-parallel --tensor-parallel-size 5",
                                           "vllm serve MODEL --enable-expert-parallel --tensor-parallel-size 1")
    assert g.fix.change == "set `--tensor-parallel-size` to `1`"
    assert dict(g.valid) == {"--tensor-parallel-size": (1, 2, 3, 4)}  # as `kb check` computes them
    # proved as a curated example fix is: kb check predicts exactly this error first, then none at all
    before = check_one(records, tree.config, g.fix.before.split(), None, None, with_valid=False)
    first = before.in_order()[0]
    assert isinstance(first, Prediction) and first.record.id == ep.id
    after = check_one(records, tree.config, g.fix.after.split(), None, None, with_valid=False)
    assert not after.predicted and after.parse_error is None and not after.validation
    assert fix_problems(ep, ExampleFix("shell", g.fix.before, g.fix.after), records, tree.config) == []
    # the smallest change that is clean for every check: --max-loras 1 would break LoRAConfig.spare (ge=1)
    lora = found[by_template(records, LORA).id]
    assert lora.fix is not None and lora.fix.after == "vllm serve MODEL --enable-lora --max-loras 2"
    # an error kb cannot decide before launch says why it has no fix
    internal = found[by_template(records, INTERNAL).id]
    assert internal.fix is None and "some_internal_thing" in internal.no_fix
    assert internal.meaning.endswith("when `--tensor-parallel-size` is greater than 8 and `some_internal_thing()` is set.")
    # a fix whose `after` still raises is not proved
    assert fix_problems(ep, ExampleFix("shell", g.fix.before, g.fix.before), records, tree.config)


def test_the_cached_guidance_keeps_the_order_it_was_found_in(tree: ScanResult, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A page writes a fix's config.json keys and request fields in the order the search gave them
    (`architectures`, `model_type`, ...): read back from the cache they come in that order, not
    sorted, so a warm build writes the pages a cold one does."""
    import kb.derived.attach as attach
    from kb.derivedmodel import DerivedFix, DerivedGuidance

    records = build_records(tree)
    target = records[0].id
    fix = DerivedFix("vllm serve MODEL", "vllm serve MODEL", "leave `z` out", {"model_type": "llama", "hidden_size": 1},
                     {}, {"z": 1, "a": 2}, {"a": 2})
    monkeypatch.setattr(attach, "derive_guidance", lambda *_a, **_k: {target: DerivedGuidance(fix=fix)})
    fresh = attach_derived(records, tree.config, 1, tmp_path)
    monkeypatch.setattr(attach, "derive_guidance", lambda *_a, **_k: pytest.fail("computed again"))
    cached = attach_derived(records, tree.config, 1, tmp_path)

    def ordered(rs: list[Record]) -> list[str]:
        return [json.dumps(r.derived.to_json()) for r in rs if r.derived is not None]

    assert ordered(cached) == ordered(fresh) and '"modelConfig": {"model_type": "llama", "hidden_size": 1}' in ordered(cached)[0]


def test_the_guidance_is_cached_by_digest_and_deterministic(tree: ScanResult, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    records = build_records(tree)
    first = attach_derived(records, tree.config, 1, tmp_path)
    (cached,) = (tmp_path / "derived").glob("*.json")
    text = cached.read_text()
    import kb.derived.attach as attach

    def fail(*_: object) -> None:
        raise AssertionError("computed again")

    monkeypatch.setattr(attach, "derive_guidance", fail)
    again = attach_derived(records, tree.config, 1, tmp_path)
    assert [r.derived for r in again] == [r.derived for r in first]
    cached.write_text("{not json")  # damaged: computed again
    monkeypatch.undo()
    assert [r.derived for r in attach_derived(records, tree.config, 1, tmp_path)] == [r.derived for r in first]
    assert cached.read_text() == text


# --- where it goes ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def site(tree: ScanResult, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("derived-site") / "site"
    build_site(tree, BuildOptions(out, site_url="https://errors.example.org", jobs=1), attach_set_by(build_records(tree), tree.config))
    return out


def test_the_page_shows_derived_guidance_marked_as_such_and_never_a_placeholder(tree: ScanResult, site: Path) -> None:
    records = build_records(tree)
    ep = by_template(records, EP)
    html = (site / f"errors/{ep.id}/index.html").read_text()
    for needle in ('<span class="badge derived">derived guidance</span>', "<h2>What it means</h2>",
                   "Derived from vLLM's source: kb reads the condition", "<code>--enable-expert-parallel</code> is on",
                   "<h2>Solutions</h2>", "<h2>Example fix</h2>", "Derived from vLLM's source, proved by <code>kb check</code>",
                   "✔ Proved: <code>kb check</code> predicts this error first",
                   "; and, marked as such, what it means, solutions, example fix (derived from vLLM"):
        assert needle in html, needle
    text = re.sub(r"<[^>]+>", "", html)  # the commands are highlighted
    assert "vllm serve MODEL --enable-expert-parallel --tensor-parallel-size 5" in text
    assert "vllm serve MODEL --enable-expert-parallel --tensor-parallel-size 1" in text
    assert 'name="robots"' not in html
    for page in site.rglob("*.html"):
        assert "Not curated" not in page.read_text(), page
    # a page with neither curated nor derived guidance: noindex, left out of the sitemap, still listed
    bare = next(r for r in records if r.file == "vllm/worker.py")
    bare_html = (site / f"errors/{bare.id}/index.html").read_text()
    assert '<meta name="robots" content="noindex">' in bare_html and "<h2>What it means</h2>" not in bare_html
    sitemap = (site / "sitemap.xml").read_text()
    assert f"/errors/{ep.id}/</loc>" in sitemap and f"/errors/{bare.id}/</loc>" not in sitemap
    assert any(bare.id in p.read_text() for p in (site / "browse").rglob("*.html"))
    about = (site / "about/index.html").read_text()
    assert 'id="indexing"' in about and "noindex" in about and 'id="derived"' in about


def test_the_api_record_carries_the_derived_guidance_and_says_which_fields(tree: ScanResult, site: Path) -> None:
    records = build_records(tree)
    ep, bare = by_template(records, EP), next(r for r in records if r.file == "vllm/worker.py")
    r = json.loads((site / f"api/errors/{ep.id}").read_text())
    jsonschema.validate(r, RECORD_SCHEMA)
    assert r["documentation"].startswith("vLLM raises this in `ParallelConfig.__post_init__` when")
    assert r["solutions"][0].startswith("Set `--tensor-parallel-size` to `1`")
    assert r["exampleFix"] == ("# before\nvllm serve MODEL --enable-expert-parallel --tensor-parallel-size 5\n# after\n"
                               "vllm serve MODEL --enable-expert-parallel --tensor-parallel-size 1\n")
    assert r["triggerScenarios"].startswith("vLLM raises this in `ParallelConfig.__post_init__` when")
    derived = r["kb"]["derived"]
    assert derived["label"] == "derived from vLLM's source, proved by kb check"
    assert derived["parts"] == ["documentation", "solutions", "exampleFix", "triggerScenarios"]
    assert derived["validValues"] == {"--tensor-parallel-size": [1, 2, 3, 4]}
    empty = json.loads((site / f"api/errors/{bare.id}").read_text())
    jsonschema.validate(empty, RECORD_SCHEMA)
    assert empty["documentation"] is None and empty["commonSituations"] is None and empty["solutions"] == []
    assert empty["kb"]["derived"] is None
    assert "Not curated" not in json.dumps(empty)


def test_one_answer_for_the_page_the_lookup_the_markdown_page_and_the_mcp_record(tree: ScanResult) -> None:
    from kb.entries.plain import preview
    from kb.mkdocs.pages import error_markdown

    records = attach_derived(build_records(tree), tree.config)
    ep = by_template(records, EP)
    g = guidance(ep)
    index = match_index(records, None)
    entry = next(e for e in index["entries"] if e["id"] == ep.id)
    assert entry["meaning"] == preview(g.meaning) and entry["solution"] == g.first_fix and entry["derived"] is True
    info = SiteInfo(tree.tree)
    assert api_record(ep, info)["documentation"] == f"{g.meaning} {g.inputs}"
    md = error_markdown(error_view(ep, info, []), info, {}, "")
    shown = re.sub(r"<[^>]+>", "", md)  # the example fix is highlighted HTML, as on the site
    assert "Derived from vLLM's source" in md and "--tensor-parallel-size 5" in shown and "Not curated" not in md
    bare = next(r for r in records if r.file == "vllm/worker.py")
    bare_md = error_markdown(error_view(bare, info, []), info, {}, "")
    assert "## What it means" not in bare_md and "## Solutions" not in bare_md and "Not curated" not in bare_md


def test_a_removed_errors_page_names_the_live_page_as_canonical(tree: ScanResult) -> None:
    records = build_records(tree)
    live = by_template(records, EP)
    old = replace(live, id="0ld0000000000a00", removed_since="0.2.0", ref="v0.1.0")
    gone = replace(by_template(records, INTERNAL), id="0ld0000000000b00", template="a message no one raises now",
                   removed_since="0.2.0", ref="v0.1.0")
    assert live_pages([*records, old, gone]) == {old.id: live.id}
    from kb.site.render import error_page

    info = SiteInfo(tree.tree, site_url="https://errors.example.org")
    html = error_page(error_view(old, info, [], canonical=live.id), info)
    assert f'<link rel="canonical" href="https://errors.example.org/errors/{live.id}/">' in html
    assert 'name="robots"' not in html  # its canonical page is indexed instead
    orphan = error_page(error_view(gone, info, []), info)
    assert 'rel="canonical"' not in orphan and '<meta name="robots" content="noindex">' in orphan
