"""The pages per environment variable and per config.json key (kb.site.config_pages) on the small
vLLM-shaped tree of test_sets: each page exists, lists the errors whose condition reads it, is linked
from the home page, the "What sets this" section and the sitemap; hostile docs are escaped; every page
stays under 50 KB."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.config.rules import page_slug
from kb.jobs import scan_release
from kb.model import ScanResult
from kb.records.merge import attach_set_by, build_records
from kb.scan.source import SourceSpec
from kb.site.build import BuildOptions, build_site
from test_sets import DCP, build_and_read, dcp_tree, record_of

ENV_ERROR = "env and dtype"
HEADS = "Total number of attention heads ({total_num_attention_heads}) must be divisible by tensor parallel " \
        "size ({tensor_parallel_size})."


@pytest.fixture
def dcp_scan(tmp_path: Path) -> ScanResult:
    return scan_release(SourceSpec(source_dir=str(dcp_tree(tmp_path / "tree"))), use_cache=False)


def test_every_env_var_has_a_page_listing_the_errors_whose_condition_reads_it(dcp_scan: ScanResult,
                                                                              tmp_path: Path) -> None:
    r = record_of(dcp_scan, ENV_ERROR)
    page = build_and_read(dcp_scan, tmp_path, "env/VLLM_PORT/index.html")
    assert "<h1><code>VLLM_PORT</code></h1>" in page and "Default: <code>8123</code>" in page
    assert 'href="https://github.com/vllm-project/vllm/blob/v0.1.0/vllm/envs.py#L' in page
    errors = page[page.index('id="errors"'):]
    assert f'href="../../errors/{r.id}/"' in errors and errors.count('<li><a href="../../errors/') == 1
    other = build_and_read(dcp_scan, tmp_path, "env/VLLM_SERVER_DEV_MODE/index.html")
    assert "No error condition that kb follows reads it." in other
    index = build_and_read(dcp_scan, tmp_path, "env/index.html")
    assert index.count('<li><a href="') == len(dcp_scan.config.env) == 2  # type: ignore[union-attr]
    assert '<a href="../env/VLLM_PORT/"><code>VLLM_PORT</code></a>' in index
    assert 'href="env/"' in build_and_read(dcp_scan, tmp_path, "index.html")
    error = build_and_read(dcp_scan, tmp_path, f"errors/{r.id}/index.html")
    section = error[error.index('<section id="set-by">'):]
    assert '<a href="../../env/VLLM_PORT/"><code>VLLM_PORT</code></a> <span class="kind">environment variable' \
        in section[: section.index("</section>")]


def test_every_config_json_key_has_a_page_with_its_reads_and_errors(dcp_scan: ScanResult, tmp_path: Path) -> None:
    dcp, heads = record_of(dcp_scan, DCP), record_of(dcp_scan, HEADS)
    page = build_and_read(dcp_scan, tmp_path, "config-json/num_attention_heads/index.html")
    assert "<h1><code>num_attention_heads</code></h1>" in page
    reads = page[page.index('id="reads"'): page.index('id="errors"')]
    assert "<code>vllm/config/model.py:" in reads and "<code>ModelConfig.verify_with_parallel_config</code>" in reads
    assert "no default: the read fails without it" in reads
    errors = page[page.index('id="errors"'):]
    assert f'href="../../errors/{dcp.id}/"' in errors and f'href="../../errors/{heads.id}/"' in errors
    index = build_and_read(dcp_scan, tmp_path, "config-json/index.html")
    assert '<a href="../config-json/num_attention_heads/"><code>num_attention_heads</code></a>' in index
    assert 'href="config-json/"' in build_and_read(dcp_scan, tmp_path, "index.html")
    error = build_and_read(dcp_scan, tmp_path, f"errors/{heads.id}/index.html")
    assert '<a href="../../config-json/num_attention_heads/"><code>num_attention_heads</code></a>' in error


def test_the_sitemap_lists_the_env_and_config_json_pages(dcp_scan: ScanResult, tmp_path: Path) -> None:
    out = tmp_path / "site"
    build_site(dcp_scan, BuildOptions(out, site_url="https://errors.example.org", jobs=1), attach_set_by(build_records(dcp_scan), dcp_scan.config))
    sitemap = (out / "sitemap.xml").read_text()
    for page in ("env/", "env/VLLM_PORT/", "env/VLLM_SERVER_DEV_MODE/", "config-json/",
                 "config-json/num_attention_heads/"):
        assert f"<loc>https://errors.example.org/{page}</loc>" in sitemap


ENV_LINE = '    "VLLM_PORT": lambda: int(os.getenv("VLLM_PORT", "8123")),\n'


def hostile_tree(root: Path, doc: str, more: int = 0) -> Path:
    tree = dcp_tree(root)
    envs = tree / "vllm/envs.py"
    extra = "".join(f'    # Variable {n}: {"a long doc " * 30}\n    "VLLM_X_{n:04}": lambda: os.getenv("VLLM_X_{n:04}", '
                    f'"{"v" * 100}"),\n' for n in range(more))
    envs.write_text(envs.read_text().replace(ENV_LINE, "".join(f"    # {line}\n" for line in doc.splitlines())
                                             + ENV_LINE + extra))
    return tree


def test_a_hostile_doc_string_reaches_the_pages_escaped(tmp_path: Path) -> None:
    evil = '<script>alert(1)</script> & `x` [y](javascript:z) {{ 7*7 }}'
    scan = scan_release(SourceSpec(source_dir=str(hostile_tree(tmp_path / "tree", evil))), use_cache=False)
    assert evil in scan.config.env_var("VLLM_PORT").doc  # type: ignore[union-attr]
    for path in ("env/VLLM_PORT/index.html", "env/index.html"):
        page = build_and_read(scan, tmp_path, path)
        assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; `x`" in page
        assert "{{ 7*7 }}" in page  # printed, never evaluated


def test_every_env_and_config_json_page_stays_under_50_kb(tmp_path: Path) -> None:
    scan = scan_release(SourceSpec(source_dir=str(hostile_tree(tmp_path / "tree", "long " * 30000, more=300))),
                        use_cache=False)
    out = tmp_path / "site"
    build_site(scan, BuildOptions(out, jobs=1), attach_set_by(build_records(scan), scan.config))
    pages = [*(out / "env").rglob("index.html"), *(out / "config-json").rglob("index.html")]
    assert len(pages) > 300 and (out / "env/page-2/index.html").is_file()
    assert max(p.stat().st_size for p in pages) < 50_000
    assert 'href="../../env/VLLM_X_0299/"' in (out / "env/page-4/index.html").read_text()


def test_page_slugs_are_one_safe_path_segment() -> None:
    assert page_slug("VLLM_PORT") == "VLLM_PORT" and page_slug("text_config.head_dim") == "text_config.head_dim"
    assert page_slug("../../etc/passwd") == "etc-passwd" and page_slug("<script>") == "script"
    assert page_slug("..") == "key" and page_slug("page-2") == "page-2-"


def test_no_env_or_config_json_pages_without_them(tmp_path: Path) -> None:
    from sitehelpers import build_fixture

    out, _ = build_fixture(tmp_path, site_url="https://errors.example.org")
    assert not (out / "env").exists() and not (out / "config-json").exists()
    home = (out / "index.html").read_text()
    assert 'href="env/"' not in home and 'href="config-json/"' not in home
    assert "/env/" not in (out / "sitemap.xml").read_text()
