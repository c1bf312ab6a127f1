"""Derived guidance on the pinned release's records (vLLM 0.34.0, the real wheel): no API record
says "not curated" or any placeholder, the conditions in words and the example fixes kb proves
stay above the floors measured, every derived fix passes the proof curated fixes pass, and the
words of a few well-known errors."""

from __future__ import annotations

import json
import os

import pytest

from kb.checks.verify import fix_problems
from kb.derived.attach import attach_derived
from kb.derived.guidance import guidance
from kb.jobs import curated_records, scan_release
from kb.model import ExampleFix, Record
from kb.paths import cache_dir
from kb.records.merge import attach_set_by
from kb.releases.published import pinned_release
from kb.scan.source import SourceSpec
from kb.site.api import SiteInfo, api_record

pytestmark = pytest.mark.release
PROSE = ("documentation", "commonSituations", "solutions", "exampleFix", "preventionTips")  # not vLLM's own text


@pytest.fixture(scope="module")
def pinned() -> tuple[list[Record], object, SiteInfo]:
    scan = scan_release(SourceSpec(vllm_version=pinned_release()))
    # the curated entries as shipped; the guidance is cached by digest in the release test cache
    records = curated_records([("", scan)], None).records
    jobs = os.cpu_count() or 1
    records = attach_derived(attach_set_by(records, scan.config, jobs), scan.config, jobs, cache_dir())
    return records, scan.config, SiteInfo(scan.tree)


def test_no_record_of_the_pinned_release_says_not_curated(pinned) -> None:  # type: ignore[no-untyped-def]
    records, _, info = pinned
    for r in records:
        record = api_record(r, info)
        assert "not curated" not in json.dumps(record).lower(), r.id
        prose = json.dumps([record[k] for k in PROSE])
        assert "TODO" not in prose and "Not curated" not in prose, r.id
    meaning = sum(1 for r in records if r.derived is not None and r.derived.meaning)
    fixes = sum(1 for r in records if r.derived is not None and r.derived.fix is not None)
    helps = sum(1 for r in records if guidance(r).helps)
    # 704 conditions in words and 43 proved fixes when measured on 0.34.0 (7,170 errors, 768 with guidance)
    assert meaning >= 650 and fixes >= 40 and helps >= 700, (meaning, fixes, helps)
    no_fix = [r for r in records if r.derived is not None and r.derived.no_fix]
    assert all(r.derived is not None and r.derived.fix is None for r in no_fix)


def test_every_derived_fix_passes_the_proof_of_a_curated_fix(pinned) -> None:  # type: ignore[no-untyped-def]
    records, model, _ = pinned
    for r in records:
        if r.derived is None or r.derived.fix is None:
            continue
        x = r.derived.fix
        fix = ExampleFix("shell", x.before, x.after, x.model_config, x.hardware, x.request_before, x.request_after)
        assert fix_problems(r, fix, records, model) == [], r.id


def test_well_known_errors_in_words(pinned) -> None:  # type: ignore[no-untyped-def]
    records, _, _ = pinned
    by_template = {r.template: r for r in records}
    eplb = by_template["enable_expert_parallel must be True to use EPLB."]
    assert eplb.derived is not None and "`--enable-eplb` is on and `--enable-expert-parallel` is off" in eplb.derived.meaning
    assert eplb.derived.fix is not None and eplb.derived.fix.before == "vllm serve MODEL --enable-eplb"
    temp = by_template["temperature must be non-negative, got {self.temperature}."]
    assert temp.derived is not None and "the request's `temperature` is less than 0.0" in temp.derived.meaning
    # a request error's fix is a request (kb check --request), proved under the same launch
    assert temp.derived.fix is not None and temp.derived.fix.request_before == {"temperature": -1.0}
    # not `temperature: 0.0`: kb cannot rule out the diffusion models' check, which reads temperature
    # too (`model_config.is_diffusion` is unknown before launch); left out, the default 1.0 passes it
    assert temp.derived.fix.request_after == {}, temp.derived.fix
    requests = sum(1 for r in records if r.derived is not None and r.derived.fix is not None
                   and r.derived.fix.request_before is not None)
    assert requests >= 20, requests  # 2x when measured on 0.34.0
