"""What sets the DCP error of the real vLLM 0.33.0 (downloaded once into the test cache): its
page names the flags with their defaults and the config.json keys its condition reads."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kb.jobs import scan_release
from kb.model import Record, ScanResult
from kb.records.merge import attach_set_by, build_records
from kb.scan.source import SourceSpec
from kb.setby import CONFIG_JSON, FLAG, REACHABILITY
from kb.site.build import BuildOptions, build_site

pytestmark = pytest.mark.release
DCP = "d97d5d8528e2b364"


@pytest.fixture(scope="module")
def scan_0_33() -> ScanResult:
    return scan_release(SourceSpec(vllm_version="0.33.0"))


@pytest.fixture(scope="module")
def records(scan_0_33: ScanResult) -> list[Record]:
    return attach_set_by(build_records(scan_0_33), scan_0_33.config)


def test_the_dcp_error_is_set_by_two_flags_and_two_config_json_keys(records: list[Record]) -> None:
    (r,) = [r for r in records if r.id == DCP]
    assert r.setby is not None
    found = {(i.kind, i.key): i for i in r.setby.inputs + r.setby.earlier}
    assert found[(FLAG, "--decode-context-parallel-size")].default == "1"
    assert found[(FLAG, "--tensor-parallel-size")].default == "1"
    assert (CONFIG_JSON, "num_attention_heads") in found and (CONFIG_JSON, "num_key_value_heads") in found
    assert r.setby.reachability == "launch configuration" and r.setby.resolved
    assert r.setby.trigger.startswith("--decode-context-parallel-size > 1 and ")
    assert r.setby.trigger.endswith("(num_attention_heads // num_key_value_heads) % --decode-context-parallel-size != 0")


def test_every_error_id_has_a_reachability_class(records: list[Record]) -> None:
    assert len(records) > 6000
    assert all(r.setby is not None and r.setby.reachability in REACHABILITY for r in records)


def test_the_dcp_page_and_its_flag_pages(scan_0_33: ScanResult, records: list[Record], tmp_path: Path) -> None:
    dcp = [replace(r, related=()) for r in records if r.id == DCP]  # a site of this page alone
    site = tmp_path / "site"
    build_site(scan_0_33, BuildOptions(site, jobs=1), attach_set_by(dcp, scan_0_33.config))
    page = (site / f"errors/{DCP}/index.html").read_text(encoding="utf-8")
    section = page[page.index('<section id="set-by">'):]
    section = section[: section.index("</section>")]
    for flag in ("decode-context-parallel-size", "tensor-parallel-size"):
        assert f'<a href="../../flags/{flag}/"><code>--{flag}</code></a> <span class="kind">flag</span>, default <code>1</code>' \
            in section
        assert f'href="../../errors/{DCP}/"' in (site / f"flags/{flag}/index.html").read_text(encoding="utf-8")
    for key in ("num_attention_heads", "num_key_value_heads"):
        assert f'<a href="../../config-json/{key}/"><code>{key}</code></a> <span class="kind">config.json key</span>' \
            in section
        assert f'href="../../errors/{DCP}/"' in (site / f"config-json/{key}/index.html").read_text(encoding="utf-8")
    assert len(page.encode()) < 50_000


def test_nine_in_ten_config_time_sites_have_every_guard_input_resolved(scan_0_33: ScanResult) -> None:
    from kb.config.resolve import SetByReader

    reader = SetByReader(scan_0_33.config)
    sites = [s for s in scan_0_33.sites if s.file.startswith(("vllm/config/", "vllm/engine/arg_utils.py"))]
    resolved = sum(reader.set_by([s]).resolved for s in sites)
    assert len(sites) > 300 and resolved / len(sites) >= 0.90, (resolved, len(sites))


def test_worker_processes_resolve_the_same_as_one(scan_0_33: ScanResult, records: list[Record]) -> None:
    fresh = build_records(scan_0_33)
    assert [r.setby for r in attach_set_by(fresh, scan_0_33.config, jobs=2)] == [r.setby for r in records]
