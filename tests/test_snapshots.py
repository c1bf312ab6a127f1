"""Snapshots of the key outputs of the fixture site: an error page, its API record, its MkDocs
page, the match index and the scan JSON. An unintended change to any of them shows as a diff.

After an intended change, regenerate them with:

    pytest tests/test_snapshots.py --snapshot-update
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kb.jobs import curated_records
from kb.mkdocs.pages import error_markdown
from kb.records.merge import attach_set_by
from kb.scan.document import scan_document
from kb.site.api import SiteInfo
from kb.site.build import BuildOptions, build_site
from kb.site.views import error_view, summary
from sitehelpers import fixture_scan, index_json

DCP = "d97d5d8528e2b364"
REGENERATE = "outputs changed: if intended, run `pytest tests/test_snapshots.py --snapshot-update`"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("snap")
    result = fixture_scan(tmp / "tree")
    merged = curated_records([("", result)], None)  # the shipped entries: the DCP page is curated
    build_site(result, BuildOptions(tmp / "site", jobs=1), attach_set_by(merged.records, result.config))
    return result, merged, tmp / "site"


def test_error_page(built, snapshot) -> None:
    _, _, site = built
    assert (site / f"errors/{DCP}/index.html").read_text() == snapshot, REGENERATE


def test_api_record(built, snapshot) -> None:
    _, _, site = built
    assert json.loads((site / f"api/errors/{DCP}").read_text()) == snapshot, REGENERATE


def test_match_index(built, snapshot) -> None:
    _, _, site = built
    assert index_json(site, "match-index") == snapshot, REGENERATE


def test_mkdocs_page(built, snapshot) -> None:
    result, merged, _ = built
    records = {r.id: r for r in attach_set_by(merged.records, result.config)}  # as the plugin does
    summaries = {i: summary(r) for i, r in records.items()}
    r = records[DCP]
    view = error_view(r, SiteInfo(result.tree), [summaries[i] for i in r.related])
    assert error_markdown(view, SiteInfo(result.tree), {i: x.title for i, x in records.items()}, "../") == snapshot, \
        REGENERATE


def test_scan_json(built, snapshot) -> None:
    result, _, _ = built
    document = scan_document(result)
    document["source"]["location"] = Path(document["source"]["location"]).name  # the tmp folder varies
    assert document == snapshot, REGENERATE
