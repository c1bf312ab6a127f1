"""What sets each error (kb.config.resolve) on small vLLM-shaped trees in tmp_path: the guard's
names resolved to flags, config.json keys, environment variables, run-time facts or internals;
the reachability class; the trigger with users' names; the "What sets this" section of the HTML
page, the Markdown page and the API record; the pages per flag; hostile guards bounded."""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from kb.config.resolve import SetByReader
from kb.config.rules import flag_slug
from kb.jobs import scan_release
from kb.mkdocs.pages import error_markdown
from kb.model import Context, LocalDef, RaiseFact, RaiseSite, Record, ScanResult
from kb.records.merge import attach_set_by, build_records
from kb.scan.source import SourceSpec
from kb.setby import CONFIG_JSON, ENV, FLAG, HARDWARE, INTERNAL, REACHABILITY, UNRESOLVED, Input
from kb.site.api import SiteInfo, api_record
from kb.site.build import BuildOptions, build_site
from kb.site.views import error_view
from test_flags import ARG_UTILS, MODEL, PARALLEL, tree_of

RECORD_SCHEMA = json.loads((Path(__file__).parent.parent / "kb/schemas/record.schema.json").read_text())

PARALLEL_DCP = PARALLEL.replace('''    distributed_executor_backend:''', '''    decode_context_parallel_size: int = 1
    """Number of decode context parallel groups."""
    distributed_executor_backend:''')
ARG_UTILS_DCP = ARG_UTILS.replace('''        parallel_group.add_argument("--distributed-executor-backend",''', '''        parallel_group.add_argument("--decode-context-parallel-size", "-dcp",
                                    **parallel_kwargs["decode_context_parallel_size"])
        parallel_group.add_argument("--distributed-executor-backend",''')
MODEL_DCP = MODEL.replace("from vllm.config.utils import config\n", "import vllm.envs as envs\nfrom vllm.config.utils import config\n"
                          "from vllm.platforms import current_platform\n") + '''
    def verify_with_parallel_config(self, parallel_config) -> None:
        total_num_attention_heads = self.hf_config.num_attention_heads
        tensor_parallel_size = parallel_config.tensor_parallel_size
        if total_num_attention_heads % tensor_parallel_size != 0:
            raise ValueError(f"Total number of attention heads ({total_num_attention_heads}) must be divisible "
                             f"by tensor parallel size ({tensor_parallel_size}).")
        decode_context_parallel_size = parallel_config.decode_context_parallel_size
        if decode_context_parallel_size > 1 and not self.use_mla:
            total_num_kv_heads = self.get_total_num_kv_heads()
            if tensor_parallel_size <= total_num_kv_heads:
                raise ValueError("Decode context parallelism needs a larger --tensor-parallel-size.")
            num_q_per_kv = total_num_attention_heads // total_num_kv_heads
            if num_q_per_kv % decode_context_parallel_size != 0:
                raise ValueError(f"The model's number of query heads per KV head ({num_q_per_kv}) must be "
                                 f"divisible by `--decode-context-parallel-size` ({decode_context_parallel_size}).")

    def check_env(self):
        if envs.VLLM_PORT == 0 and self.dtype == "half":
            raise ValueError("env and dtype")
        if current_platform.get_device_capability() < 80:
            raise ValueError("device too old")
        if self.internal_counter > 3:
            raise ValueError("counter is internal")
        for size in self.sizes_seen:
            if size < 0:
                raise ValueError("a size below zero")
'''
SERVING = '''
def check_request(request):
    if request.n > 5:
        raise ValueError("n too large")


def invariant(state):
    if state is None:
        raise ValueError("no state")
'''
DCP = "The model's number of query heads per KV head ({num_q_per_kv}) must be divisible by " \
      "`--decode-context-parallel-size` ({decode_context_parallel_size})."


def dcp_tree(root: Path) -> Path:
    return tree_of(root, {"vllm/config/parallel.py": PARALLEL_DCP, "vllm/engine/arg_utils.py": ARG_UTILS_DCP,
                          "vllm/config/model.py": MODEL_DCP, "vllm/platforms/__init__.py": "current_platform = None\n",
                          "vllm/entrypoints/openai/serving.py": SERVING, "vllm/worker.py": SERVING})


@pytest.fixture
def dcp_scan(tmp_path: Path) -> ScanResult:
    return scan_release(SourceSpec(source_dir=str(dcp_tree(tmp_path / "tree"))), use_cache=False)


def records_of(scan: ScanResult) -> list[Record]:
    return attach_set_by(build_records(scan), scan.config)


def record_of(scan: ScanResult, template: str, file: str = "") -> Record:
    found = [r for r in records_of(scan) if r.template == template and (not file or r.file == file)]
    assert len(found) == 1, [r.template for r in build_records(scan)]
    return found[0]


def by_key(inputs: tuple[Input, ...]) -> dict[str, Input]:
    return {i.key: i for i in inputs}


# --- resolution -------------------------------------------------------------------------------------
def test_the_dcp_error_names_its_flags_with_defaults_and_its_config_json_keys(dcp_scan: ScanResult) -> None:
    sb = record_of(dcp_scan, DCP).setby
    assert sb is not None
    inputs = by_key(sb.inputs)
    dcp = inputs["--decode-context-parallel-size"]
    assert (dcp.kind, dcp.default, dcp.help, dcp.flag_page) == (
        FLAG, "1", "Number of decode context parallel groups.", "flags/decode-context-parallel-size/")
    assert dcp.read == "parallel_config.decode_context_parallel_size"
    assert inputs["num_attention_heads"].kind == CONFIG_JSON and inputs["num_key_value_heads"].kind == CONFIG_JSON
    assert inputs["ModelConfig.use_mla"].kind == "checkpoint"
    # --tensor-parallel-size is read by the earlier check of the same block, which must not raise first
    tp = by_key(sb.earlier)["--tensor-parallel-size"]
    assert (tp.kind, tp.default, tp.flag_page) == (FLAG, "1", "flags/tensor-parallel-size/")
    assert "--tensor-parallel-size" not in inputs
    assert sb.resolved and sb.reachability == "launch configuration"
    assert sb.trigger == ("--decode-context-parallel-size > 1 and (not self.use_mla) and "
                          "(num_attention_heads // num_key_value_heads) % --decode-context-parallel-size != 0")


def test_environment_hardware_internal_and_loop_names(dcp_scan: ScanResult) -> None:
    env = record_of(dcp_scan, "env and dtype").setby
    assert env is not None
    assert {(i.kind, i.key) for i in env.inputs} == {(ENV, "VLLM_PORT"), (FLAG, "--dtype")}
    assert env.trigger == "VLLM_PORT == 0 and --dtype == 'half'"
    hw = record_of(dcp_scan, "device too old").setby
    assert hw is not None
    assert [(i.kind, i.key) for i in hw.inputs] == [(HARDWARE, "current_platform.get_device_capability()")]
    assert hw.reachability == "hardware/run time"
    internal = record_of(dcp_scan, "counter is internal").setby
    assert internal is not None
    assert [(i.kind, i.key) for i in internal.inputs] == [(INTERNAL, "ModelConfig.internal_counter")]
    assert internal.resolved
    # the loop variable is followed to what the loop walks
    loop = record_of(dcp_scan, "a size below zero").setby
    assert loop is not None and [(i.kind, i.read) for i in loop.inputs] == [(INTERNAL, "self.sizes_seen")]


def test_reachability_falls_back_to_where_it_is_raised_and_every_error_has_a_class(dcp_scan: ScanResult) -> None:
    request = record_of(dcp_scan, "n too large", "vllm/entrypoints/openai/serving.py").setby
    assert request is not None and request.reachability == "request" and not request.resolved
    assert [(i.kind, i.key) for i in request.inputs] == [(UNRESOLVED, "request.n")]
    other = record_of(dcp_scan, "no state", "vllm/worker.py").setby
    assert other is not None and other.reachability == "internal invariant"
    assert all(r.setby is not None and r.setby.reachability in REACHABILITY for r in records_of(dcp_scan))


def test_records_are_built_without_it_and_the_site_build_attaches_it(dcp_scan: ScanResult, tmp_path: Path) -> None:
    assert all(r.setby is None for r in build_records(dcp_scan))  # kb explain, lint, check do not pay for it
    r = record_of(dcp_scan, DCP)
    page = build_and_read(dcp_scan, tmp_path, f"api/errors/{r.id}")
    assert json.loads(page)["kb"]["setBy"] == r.setby.to_json()  # type: ignore[union-attr]


def test_a_tree_without_flags_still_resolves_config_json_keys(tmp_path: Path) -> None:
    from sitehelpers import fixture_scan

    scan = fixture_scan(tmp_path / "tree")
    assert scan.config is None
    (r,) = [r for r in records_of(scan) if r.template.startswith("The model's number of query heads")]
    assert r.setby is not None
    assert {(i.kind, i.key) for i in r.setby.inputs} >= {(CONFIG_JSON, "num_attention_heads"),
                                                         (CONFIG_JSON, "num_key_value_heads")}
    assert [i.kind for i in r.setby.inputs if i.key == "parallel_config.decode_context_parallel_size"] == [UNRESOLVED]


def _site(terms: tuple[str, ...], locals_: tuple[LocalDef, ...] = (), contexts: tuple[Context, ...] = ()) -> RaiseSite:
    from kb.model import Excerpt

    fact = RaiseFact(3, 3, "f", "ValueError", "ValueError", "m", False, "literal", terms, contexts, locals_, (), False,
                     None)
    return RaiseSite("0" * 16, "vllm/x.py", fact, "ValueError", Excerpt(1, ("x",) * 5))


@pytest.fixture
def alarm() -> Iterator[None]:
    def stop(*_: object) -> None:
        raise TimeoutError("the resolver did not end in 30 s")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(30)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("term", [
    "-" * 1990 + "x",  # parses, nested deeper than the recursion limit
    "x" + " + x" * 5000,  # longer than a term kb parses
    "(lambda: (yield))() and x.y(",  # not Python
    "a" + ".b" * 900 + " > 1",
])
def test_hostile_guards_end_bounded_as_unresolved_never_a_traceback(term: str, alarm: None) -> None:
    reader = SetByReader(None)
    site = _site((term,), (LocalDef("x", "x + 1", 2), LocalDef("a", "a.b", 2)))
    sb = reader.set_by([site])
    assert sb.reachability in REACHABILITY
    assert not sb.resolved
    assert len(sb.trigger) <= max(len(term), 2000) + 10


def test_locals_defined_through_each_other_end(alarm: None) -> None:
    site = _site(("a > b",), (LocalDef("a", "b + 1", 1), LocalDef("b", "a + envs.VLLM_X", 2)))
    sb = SetByReader(None).set_by([site])
    # followed MAX_DEPTH times, then the names of the cycle are left unresolved
    assert {(i.kind, i.key) for i in sb.inputs} == {(ENV, "VLLM_X"), (UNRESOLVED, "a"), (UNRESOLVED, "b")}
    assert not sb.resolved and "VLLM_X" in sb.trigger


def test_flag_slugs_are_one_safe_path_segment(tmp_path: Path) -> None:
    from dataclasses import replace

    from test_flags import flag, model_of

    f = flag(model_of(tree_of(tmp_path / "tree")), "--tensor-parallel-size")
    assert flag_slug(f) == "tensor-parallel-size"
    assert flag_slug(replace(f, name="--../../etc/passwd")) == "etc-passwd"
    assert flag_slug(replace(f, name="--", dest="")) == "flag"
    assert flag_slug(replace(f, name="--<script>")) == "script"


# --- pages --------------------------------------------------------------------------------------------
def test_the_error_page_markdown_and_api_record_say_what_sets_it(dcp_scan: ScanResult, tmp_path: Path) -> None:
    r = record_of(dcp_scan, DCP)
    info = SiteInfo(dcp_scan.tree)
    page = build_and_read(dcp_scan, tmp_path, f"errors/{r.id}/index.html")
    section = page[page.index('<section id="set-by">'):]
    section = section[: section.index("</section>")]
    assert '<a href="../../flags/decode-context-parallel-size/"><code>--decode-context-parallel-size</code></a>' in section
    assert ", default <code>1</code>." in section and "Number of decode context parallel groups." in section
    assert ('<a href="../../config-json/num_attention_heads/"><code>num_attention_heads</code></a> '
            '<span class="kind">config.json key</span>') in section
    assert '<a href="../../flags/tensor-parallel-size/"><code>--tensor-parallel-size</code></a>' in section
    assert "Reachable through: <strong>launch configuration</strong>" in section
    assert '(its guard reads a flag or an environment variable; <a href="../../about/#set-by">from the source</a>)' \
        in section
    record = api_record(r, info)
    jsonschema.validate(record, RECORD_SCHEMA)
    sb = record["kb"]["setBy"]
    assert sb["reachability"] == "launch configuration" and sb["resolved"] is True
    assert {"kind": "flag", "key": "--decode-context-parallel-size", "default": "1",
            "page": "/flags/decode-context-parallel-size/"}.items() <= sb["inputs"][0].items()
    md = error_markdown(error_view(r, info, []), info, {}, "../")
    assert "## What sets this" in md
    assert "- `--decode-context-parallel-size` (flag), default `1`. Number of decode context parallel groups." in md
    assert "- `--tensor-parallel-size` (flag), default `1`." in md


def build_and_read(scan: ScanResult, tmp_path: Path, path: str) -> str:
    out = tmp_path / "site"
    if not out.exists():
        build_site(scan, BuildOptions(out, jobs=1), attach_set_by(build_records(scan), scan.config))
    return (out / path).read_text(encoding="utf-8")


def test_every_flag_has_a_page_listing_the_errors_it_takes_part_in(dcp_scan: ScanResult, tmp_path: Path) -> None:
    r = record_of(dcp_scan, DCP)
    page = build_and_read(dcp_scan, tmp_path, "flags/decode-context-parallel-size/index.html")
    assert "<h1><code>--decode-context-parallel-size</code></h1>" in page
    assert "Default: <code>1</code>" in page and "Number of decode context parallel groups." in page
    assert "<code>-dcp</code>" in page and "<code>ParallelConfig.decode_context_parallel_size</code>" in page
    errors = page[page.index('id="errors"'):]
    assert f'href="../../errors/{r.id}/"' in errors
    tp = build_and_read(dcp_scan, tmp_path, "flags/tensor-parallel-size/index.html")
    assert f'href="../../errors/{r.id}/"' in tp[tp.index('id="earlier"'):]  # checked before the DCP error
    index = build_and_read(dcp_scan, tmp_path, "flags/index.html")
    assert index.count('<li><a href="') == len({flag_slug(f) for f in dcp_scan.config.flags})  # type: ignore[union-attr]
    assert '<a href="decode-context-parallel-size/"><code>--decode-context-parallel-size</code></a>' in index
    counts = re.findall(r'<span class="count">([^<]*)</span>', index)  # labelled: "3 flags", "1 error"
    assert counts and all(re.fullmatch(r"\d+ (flags?|errors?)", c) for c in counts), counts
    assert any(c.endswith(("error", "errors")) for c in counts), counts
    assert 'href="../flags/"' in build_and_read(dcp_scan, tmp_path, "browse/index.html")
    assert 'href="flags/"' in build_and_read(dcp_scan, tmp_path, "index.html")


def test_no_flag_pages_without_a_parser(tmp_path: Path) -> None:
    from sitehelpers import build_fixture

    out, _ = build_fixture(tmp_path)
    assert not (out / "flags").exists()
    assert "flags/" not in (out / "browse/index.html").read_text()


def test_what_sets_this_is_deterministic(tmp_path: Path) -> None:
    a = [r.setby for r in records_of(scan_release(SourceSpec(source_dir=str(dcp_tree(tmp_path / "a"))),
                                                  use_cache=False))]
    b = [r.setby for r in records_of(scan_release(SourceSpec(source_dir=str(dcp_tree(tmp_path / "b"))),
                                                  use_cache=False))]
    assert a == b and all(x is not None for x in a)


def test_hostile_help_and_names_reach_the_pages_escaped(tmp_path: Path) -> None:
    evil = '<script>alert(1)</script> & `x` [y](javascript:z) {{ 7*7 }}'
    root = dcp_tree(tmp_path / "tree")
    parallel = root / "vllm/config/parallel.py"
    parallel.write_text(parallel.read_text().replace("Number of decode context parallel groups.", evil))
    scan = scan_release(SourceSpec(source_dir=str(root)), use_cache=False)
    r = record_of(scan, DCP)
    for path in (f"errors/{r.id}/index.html", "flags/decode-context-parallel-size/index.html"):
        page = build_and_read(scan, tmp_path, path)
        assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; `x`" in page
        assert "{{ 7*7 }}" in page  # printed, never evaluated
    md = error_markdown(error_view(r, SiteInfo(scan.tree), []), SiteInfo(scan.tree), {}, "../")
    line = next(x for x in md.splitlines() if x.startswith("- `--decode-context-parallel-size`"))
    assert "&lt;script&gt;" in line and "\\[y\\]\\(javascript:z\\)" in line and "<script>" not in line
