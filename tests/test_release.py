"""Integration tests on real vLLM release wheels from the package index (downloaded once
through kb's own download code into the user cache, then reused)."""

from __future__ import annotations

import io
import tokenize

import pytest

from kb.api import scan_release
from kb.paths import cache_dir
from kb.source import SourceSpec, download_wheel, from_wheel

pytestmark = pytest.mark.release

DCP_ID = "d97d5d8528e2b364"
DCP_TEMPLATE = ("The model's number of query heads per KV head ({num_q_per_kv}) must be divisible by "
                "`--decode-context-parallel-size` ({decode_context_parallel_size}) for GQA/MQA.")


@pytest.fixture(scope="module")
def scan_0_33():
    return scan_release(SourceSpec(vllm_version="0.33.0"))


def raise_valueerror_tokens(version: str) -> set[tuple[str, int]]:
    """What grep finds, minus comments and strings: `raise ValueError` as tokens."""
    found: set[tuple[str, int]] = set()
    with from_wheel(download_wheel(version, cache_dir()), include_vendored=False) as tree:
        for path, data in tree.items():
            toks = [t for t in tokenize.tokenize(io.BytesIO(data).readline)
                    if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT)]
            for a, b in zip(toks, toks[1:]):
                if (a.type, a.string, b.type, b.string) == (tokenize.NAME, "raise", tokenize.NAME, "ValueError"):
                    found.add((path, a.start[0]))
    return found


def test_every_raise_valueerror_is_found(scan_0_33) -> None:
    grep = raise_valueerror_tokens("0.33.0")
    ours = {(s.file, s.line) for s in scan_0_33.sites if s.fact.exception == "ValueError"}
    assert len(grep) > 4000
    assert ours == grep


def test_subclasses_of_valueerror_are_found(scan_0_33) -> None:
    classes = {s.exception_class for s in scan_0_33.sites}
    assert {"StructuredDecisionError", "MediaDownloadSizeExceededError"} <= classes
    assert "VLLMValidationError" not in classes  # an Exception, not a ValueError, since 0.27


def test_quality_figures(scan_0_33) -> None:
    c = scan_0_33.counts
    assert c["parse_warnings"] == 0
    assert c["unresolved_templates"] <= 0.01 * c["sites"]
    assert c["excluded_files"] > 0
    assert scan_0_33.tree.release == "0.33.0" and scan_0_33.tree.commit == "g4ba787ec9"
    assert scan_0_33.tree.ref == "v0.33.0"


def test_dcp_site_0_33(scan_0_33) -> None:
    (site,) = [s for s in scan_0_33.sites if s.id == DCP_ID]
    assert (site.file, site.line, site.fact.qualname, site.template) == (
        "vllm/config/model.py", 1602, "ModelConfig.verify_with_parallel_config", DCP_TEMPLATE)
    assert "num_q_per_kv % decode_context_parallel_size != 0" in site.fact.guard
    assert site.fact.guard_terms[0] == "decode_context_parallel_size > 1 and not self.use_mla"
    assert ("num_q_per_kv", "total_num_attention_heads // total_num_kv_heads") in [
        (d.name, d.source) for d in site.fact.locals]
    assert (site.excerpt.start, site.excerpt.end) == (1584, 1620)


def test_dcp_site_0_28() -> None:
    result = scan_release(SourceSpec(vllm_version="0.28.0"))
    (site,) = [s for s in result.sites if s.id == DCP_ID]
    assert (site.file, site.line, site.template) == ("vllm/config/model.py", 1410, DCP_TEMPLATE)
    assert (site.excerpt.start, site.excerpt.end) == (1392, 1428)
