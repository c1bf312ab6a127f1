"""Error URLs that never break (#33): `/<release>/errors/<id>/` for any release leads to the built
release's page (saying which release was asked for), an id of an older wording to the live page
that answers for it, an id nothing answers for to the search; the same rules in `kb serve`, in the
generated `/_redirects` (for the releases kb knows) and in the 404 page's script on a static host
under a sub-path (a real browser). Hostile releases are never put in a URL or a page."""

from __future__ import annotations

import contextlib
import http.client
import http.server
import json
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from kb.model import Wording
from kb.records.merge import attach_set_by, build_records
from kb.site.build import BuildOptions, build_site
from kb.site.serve import make_server
from kb.site.urlmap import MAX_RELEASE_RULES, error_target, redirects
from kb.urls import error_url
from sitehelpers import fixture_scan, pages_like_host

DCP = "d97d5d8528e2b364"
SLUG = "the-model-s-number-of-query-heads-per-kv-head"
OLD = "0123456789abcdef"  # DCP's message as older releases worded it: its live page is DCP's
GONE = "fedcba9876543210"  # raised by older releases only; no live error answers for it
UNKNOWN = "00000000000000aa"  # no release kb knows has it
BUILT = "0.1.0"  # the fixture tree's release


def build(tmp: Path) -> Path:
    result = fixture_scan(tmp / "tree")
    (dcp,) = [s for s in result.sites if s.id == DCP]
    wordings = (
        Wording(OLD, dcp.template.replace("must be divisible", "has to be divisible"), dcp.file, 1, "f", "ValueError",
                "0.0.1", "0.0.9", DCP, BUILT, DCP, DCP),
        Wording(GONE, "A removed check of an old release that no page answers for", "vllm/old.py", 3, "g",
                "ValueError", "0.0.1", "0.0.5", None, "0.0.6", GONE),
    )
    site = tmp / "site"
    build_site(result, BuildOptions(site, jobs=1), attach_set_by(build_records(result), result.config), wordings=wordings)
    return site


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("urls"))


@contextlib.contextmanager
def serving(site: Path) -> Iterator[int]:
    srv = make_server(site, 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield srv.server_address[1]
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture(scope="module")
def port(site: Path) -> Iterator[int]:
    with serving(site) as p:
        yield p


def request(port: int, path: str) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body


# path asked -> where kb serve (and the 404 page's script, and /_redirects for a release it lists) leads
LEADS = {
    f"/{BUILT}/errors/{DCP}/": f"/errors/{DCP}/",  # the built release: its page, nothing to say
    f"/0.33.0/errors/{DCP}/": f"/errors/{DCP}/?release=0.33.0",  # an older release kb knows
    f"/9.0.1/errors/{DCP}/": f"/errors/{DCP}/?release=9.0.1",  # a release newer than any kb knows
    f"/0.8.5.post1/errors/{DCP}": f"/errors/{DCP}/?release=0.8.5.post1",  # a patch kb does not list; no slash
    f"/0.33.0/errors/{SLUG}/": f"/errors/{DCP}/?release=0.33.0",  # a slug under a release
    f"/errors/{OLD}/": f"/errors/{DCP}/?from={OLD}",  # an older wording's id: the live page answering for it
    f"/0.0.9/errors/{OLD}/": f"/errors/{DCP}/?release=0.0.9&from={OLD}",
    f"/errors/{GONE}/": f"/search/?q={GONE}",  # known, but no page answers for it
    f"/0.33.0/errors/{UNKNOWN}/": f"/search/?q={UNKNOWN}",
    f"/errors/{UNKNOWN}/": f"/search/?q={UNKNOWN}",
    "/0.33.0/errors/no-such-slug/": "/errors/no-such-slug/?release=0.33.0",  # then the 404 page says so
    "/0.8.5%2Bcu121/errors/" + DCP + "/": f"/errors/{DCP}/?release=0.8.5%2Bcu121",  # a local version, encoded
}


def test_kb_serve_leads_each_error_url_to_its_page(port: int) -> None:
    for path, target in LEADS.items():
        status, headers, _ = request(port, path)
        assert (status, headers.get("location")) == (302, target), path
        status, headers, body = request(port, target)
        if "no-such-slug" in target:
            assert status == 404 and b'id="missing"' in body, target  # the 404 page: its script names the slug
        else:
            assert status == 200 and "location" not in headers, target
    # a page of its own, a slug without a release: as before
    assert request(port, f"/errors/{DCP}/")[0] == 200
    assert request(port, f"/errors/{SLUG}/")[1]["location"] == f"/errors/{DCP}/"
    assert request(port, "/errors/no-such-slug/")[0] == 404


HOSTILE = ["/0.33.0<script>alert(1)<%2Fscript>/errors/" + DCP + "/", "/0.33.0%22onload=x/errors/" + DCP + "/",
           "/0.33.0%0d%0aSet-Cookie:%20pwn=1/errors/" + DCP + "/", "/v0.33.0/errors/" + DCP + "/",
           "/latest/errors/" + DCP + "/", "/2024/errors/" + DCP + "/", "/0." + "1" * 70 + "/errors/" + DCP + "/",
           "//127.0.0.1:9/0.33.0/errors/" + DCP + "/", "/%5C127.0.0.1:9/0.33.0/errors/" + DCP + "/",
           "/x/0.33.0/errors/" + DCP + "/", "/0.33.0/errors/" + DCP.upper() + "/", "/0.33.0/../errors/" + DCP + "/"]


def test_kb_serve_never_reflects_a_release_that_is_none(port: int) -> None:
    for path in HOSTILE:
        status, headers, body = request(port, path)
        assert status in (403, 404), path
        assert "location" not in headers and "set-cookie" not in headers, path
        assert b"<script>alert" not in body and b"onload=x" not in body, path


def test_the_rules_as_one_function() -> None:
    pages = {DCP}.__contains__
    slugs = {SLUG: DCP}.get
    older = {OLD: DCP}.get

    def lead(release: str | None, name: str) -> str | None:
        return error_target(release, name, BUILT, pages, slugs, older)

    assert lead(None, DCP) is None  # served as it is
    assert lead(BUILT, DCP) == f"errors/{DCP}/"
    assert lead("0.10.1rc1", OLD) == f"errors/{DCP}/?release=0.10.1rc1&from={OLD}"
    assert lead(None, "no-such-slug") is None  # the 404 page says no error has it
    for bad in ["0.33.0<b>", "0..1/x", "0.1.0 ", "0.1.0\n", "v0.1.0", "0." + "1" * 70, "0.1.0/../x"]:
        assert lead(bad, DCP) is None, bad
    # a site that is no release: every release is "asked"
    assert error_target("0.33.0", DCP, None, pages, slugs, older) == f"errors/{DCP}/?release=0.33.0"
    # an older id whose live page the site lacks is not followed
    assert error_target(None, OLD, BUILT, pages, slugs, {OLD: UNKNOWN}.get) == f"search/?q={OLD}"


def test_printed_urls_name_the_release() -> None:
    assert error_url(DCP, None, "0.34.0") == f"/0.34.0/errors/{DCP}/"
    assert error_url(DCP, "https://kb.example/x/", "0.6.6.post1") == f"https://kb.example/x/0.6.6.post1/errors/{DCP}/"
    assert error_url(DCP, "https://kb.example", None) == f"https://kb.example/errors/{DCP}/"
    for not_a_release in ["main", "/tmp/vllm-0.34.0-cp38-abi3-manylinux1_x86_64.whl", "0.34.0/../../x", "0.34.0<b>"]:
        assert error_url(DCP, None, not_a_release) == f"/errors/{DCP}/", not_a_release


def test_kb_explain_and_search_print_the_release_of_their_index(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kb.cli import main

    paste = ("ValueError: The model's number of query heads per KV head (6) must be divisible by "
             "`--decode-context-parallel-size` (4) for GQA/MQA.")
    assert main(["explain", "--site", str(site), "--json", paste]) == 0
    assert json.loads(capsys.readouterr().out)["found"][0]["match"]["url"] == f"/{BUILT}/errors/{DCP}/"
    assert main(["explain", "--site", str(site), "--site-url", "https://kb.example", paste]) == 0
    assert f"https://kb.example/{BUILT}/errors/{DCP}/" in capsys.readouterr().out
    assert main(["search", "--site", str(site), "--json", "query heads per KV head"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert results and all(r["url"] == f"/{BUILT}/errors/{r['id']}/" for r in results)


def test_the_scheme_is_said_on_the_site(site: Path) -> None:
    about = (site / "about/index.html").read_text()
    assert 'id="urls"' in about and "<code>/&lt;release&gt;/errors/&lt;id&gt;/</code>" in about
    llms = (site / "llms.txt").read_text()
    assert f"- /<release>/errors/<id>/: an error's page for a release, as kb prints its links. This site describes " \
           f"vLLM {BUILT}: any other release's URL leads to this release's page" in llms
    assert json.loads((site / "api/older-ids/0.json").read_text()) == {OLD: DCP}  # GONE has no page to go to
    assert all(json.loads((site / f"api/older-ids/{c}.json").read_text()) == {} for c in "123456789abcdef")


# --- /_redirects -------------------------------------------------------------------------------
def _pattern(source: str) -> re.Pattern[str]:
    """A rule's source as Netlify and Cloudflare Pages match it: `:name` one path segment (or up
    to a dot), `*` the rest."""
    out = ""
    for token in re.split(r"(:[A-Za-z]+|\*)", source):
        if token == "*":
            out += "(?P<splat>.*)"
        elif token.startswith(":"):
            out += f"(?P<{token[1:]}>[^/.]+)"
        else:
            out += re.escape(token)
    return re.compile(out + r"\Z")


def _rules(text: str) -> list[tuple[str, str, str]]:
    rules = []
    for line in text.splitlines():
        assert line == line.strip() and line and not line.startswith("#"), line
        fields = line.split()
        assert len(fields) == 3, line
        source, target, code = fields
        assert source.startswith("/") and target.startswith("/") and code in ("200", "301", "302"), line
        assert set(re.findall(r":[A-Za-z]+", target)) <= set(re.findall(r":[A-Za-z]+", source)), line
        rules.append((source, target, code))
    return rules


def _apply(rules: list[tuple[str, str, str]], path: str) -> str | None:
    """The first rule matching `path` (with or without its trailing slash), its target filled in."""
    for source, target, _ in rules:
        m = _pattern(source.rstrip("/")).match(path.rstrip("/"))
        if m is not None:
            for name, value in m.groupdict().items():
                target = target.replace(f":{name}", value)
            return target
    return None


def test_redirects_are_well_formed_within_every_hosts_limits_and_agree_with_kb_serve(site: Path, port: int) -> None:
    text = (site / "_redirects").read_text()
    rules = _rules(text)
    dynamic = [i for i, (source, _, _) in enumerate(rules) if ":" in source or "*" in source]
    static = [i for i, (source, _, _) in enumerate(rules) if i not in dynamic]
    # Cloudflare Pages: at most 100 dynamic rules, static ones first; GitLab Pages: 1,000 rules, 64 KB
    assert len(dynamic) <= 100 and all(i < dynamic[0] for i in static) and len(rules) <= 1000 and len(text) < 64_000
    # no rule hides another: a path each rule is for is matched first by that rule
    for n, (source, _, _) in enumerate(rules):
        sample = re.sub(r":[A-Za-z]+", DCP, source)
        assert _apply(rules[:n + 1], sample) is not None and _apply(rules[:n], sample) is None, source
    assert _apply(rules, f"/api/errors/{DCP}.json") == f"/api/errors/{DCP}"
    # every release the site knows has its rule, the built one first; each leads where kb serve leads
    known = [r["release"] for r in json.loads((site / "api/releases.json").read_text())["releases"]]
    assert len(known) > 30 and rules[1][0] == f"/{BUILT}/errors/:id/"
    for release in known:
        path = f"/{release}/errors/{DCP}/"
        assert _apply(rules, path) == request(port, path)[1]["location"], release
    assert _apply(rules, f"/9.0.1/errors/{DCP}/") is None  # left to the 404 page's script
    assert _apply(rules, f"/api/errors/{DCP}") is None and _apply(rules, "/releases/0.33.0/") is None


def test_redirects_keep_to_cloudflares_rules_with_many_releases() -> None:
    releases = [f"0.{n}.0" for n in range(300)]
    rules = _rules(redirects([*releases, "main", "0.1<b>"], "0.299.0"))
    assert len(rules) == 1 + MAX_RELEASE_RULES <= 100
    assert rules[1][0] == "/0.299.0/errors/:id/" and rules[2][0] == "/0.298.0/errors/:id/"  # the newest kept
    assert not any("main" in s or "<" in s for s, _, _ in rules)


# --- the 404 page's script, on a static host without redirects, under a sub-path -------------------
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists() or shutil.which(CHROMIUM) is None:
        pytest.skip("Debian's chromium is not installed")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def pages_host(site: Path) -> Iterator[str]:
    """The site on a static host as GitHub Pages is one (sitehelpers.pages_like_host)."""
    with pages_like_host(site) as url:
        yield url


def _settled(page, url: str, target: str) -> str:  # type: ignore[no-untyped-def]
    """Go to `url`, wait until the page is `target` (its path and query under the host), say where it is."""
    page.goto(url)
    page.wait_for_function("t => location.pathname + location.search === t", arg=target, timeout=15000)
    page.wait_for_load_state("load")
    return page.url


def test_the_404_script_leads_each_error_url_where_kb_serve_does(browser, pages_host: str) -> None:
    page = browser.new_page()
    try:
        for path, target in LEADS.items():
            if "no-such-slug" in path:
                continue
            _settled(page, pages_host + path, "/kb" + target)
            if target.startswith("/search/"):
                assert page.locator("#q").input_value() == target.split("=", 1)[1], path
            else:
                assert page.locator("h1").inner_text().startswith("The model's number of query heads"), path
        page.goto(pages_host + "/0.33.0/errors/no-such-slug/")
        page.wait_for_function("document.getElementById('missing').textContent.includes('no-such-slug')",
                               timeout=15000)
        assert urlsplit(page.url).path == "/kb/errors/no-such-slug/"
    finally:
        page.close()


def test_the_page_says_which_release_and_id_the_link_was_for(browser, pages_host: str) -> None:
    page = browser.new_page()
    try:
        _settled(page, f"{pages_host}/0.33.0/errors/{DCP}/", f"/kb/errors/{DCP}/?release=0.33.0")
        note = page.locator("p.ids + p.notice.asked")
        assert note.inner_text() == (f"You followed a link for vLLM 0.33.0; this page shows the error in vLLM "
                                     f"{BUILT}, the release this site is built for.")
        _settled(page, f"{pages_host}/0.0.9/errors/{OLD}/", f"/kb/errors/{DCP}/?release=0.0.9&from={OLD}")
        assert page.locator("p.ids + p.notice.asked").inner_text() == (
            f"You followed a link to error {OLD} of vLLM 0.0.9, an id of an older release; this page answers for "
            f"it in vLLM {BUILT}, the release this site is built for.")
        _settled(page, f"{pages_host}/{BUILT}/errors/{SLUG}/", f"/kb/errors/{DCP}/")
        assert page.locator("p.notice").count() == 0  # the built release: nothing to say
        # a query no link of kb makes is not shown, let alone as markup
        for query in ["?release=0.33.0%22%3E%3Cb%20id%3Dpwn%3Ex", "?release=%3Cimg%20src%3Dx%20id%3Dpwn%3E",
                      "?from=%3Cb%20id%3Dpwn%3E", f"?release={BUILT}"]:
            page.goto(f"{pages_host}/errors/{DCP}/{query}")
            page.wait_for_load_state("load")
            assert page.locator("p.notice").count() == 0 and page.locator("#pwn").count() == 0, query
    finally:
        page.close()


def test_the_404_script_stays_on_the_site(browser, pages_host: str) -> None:
    page = browser.new_page()
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url))
    try:
        origin = pages_host.rsplit("/kb", 1)[0]
        for path in ["//127.0.0.1:9/0.33.0/errors/" + DCP + "/", "/\\127.0.0.1:9/0.33.0/errors/" + DCP + "/",
                     "/kb/0.33.0%3Cb%3E/errors/" + DCP + "/"]:
            page.goto(origin + path)
            page.wait_for_timeout(300)
            assert page.url.startswith(origin), page.url
        assert not any(urlsplit(u).port == 9 for u in seen), seen
        assert urlsplit(page.url).path.startswith("/kb/0.33.0")  # not a release: the 404 page stays
    finally:
        page.close()


def test_an_id_with_no_page_is_answered_on_the_search_page(browser, pages_host: str) -> None:
    """Where a removed error's link lands (`/search/?q=<id>`): the lookup answers for the id as for
    its wording, what kb explain says of a removed error; an id nothing has stays unanswered."""
    page = browser.new_page()
    try:
        page.goto(f"{pages_host}/search/?q={GONE}")
        page.wait_for_function("(s => s !== '' && !s.endsWith('…'))(document.getElementById('status').textContent)",
                               timeout=15000)
        text = page.inner_text("#results")
        assert "A removed check of an old release that no page answers for" in text
        assert "Raised up to vLLM 0.0.5 (from 0.0.1); removed in 0.0.6." in text
        page.goto(f"{pages_host}/search/?q={UNKNOWN}")
        page.wait_for_function("(s => s !== '' && !s.endsWith('…'))(document.getElementById('status').textContent)",
                               timeout=15000)
        assert "A removed check" not in page.inner_text("#results")
    finally:
        page.close()
