from __future__ import annotations

import http.client
import threading
from pathlib import Path

import pytest

from kb.errors import KBError
from kb.site.serve import make_server
from sitehelpers import build_fixture

DCP = "d97d5d8528e2b364"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    site, _ = build_fixture(tmp_path_factory.mktemp("serve"))
    (site.parent / "secret.txt").write_text("SECRET-CONTENT")
    srv = make_server(site, 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def get(port: int, path: str) -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, resp.getheader("Content-Type", ""), body


def test_api_paths_are_json_with_or_without_extension(server: int) -> None:
    a = get(server, f"/api/errors/{DCP}")
    b = get(server, f"/api/errors/{DCP}.json")
    assert a[0] == b[0] == 200
    assert a[1] == b[1] == "application/json"
    assert a[2] == b[2]


def test_pages_and_assets(server: int) -> None:
    status, ctype, body = get(server, f"/errors/{DCP}/")
    assert status == 200 and ctype == "text/html; charset=utf-8" and b"Error message" in body
    assert get(server, "/static/style.css")[1] == "text/css"
    assert get(server, "/static/search.js")[1] == "text/javascript"


def test_paths_outside_the_site_are_refused(server: int) -> None:
    for path in ["/../secret.txt", "/%2e%2e/secret.txt", "/errors/../../secret.txt", "/..%2fsecret.txt"]:
        status, _, body = get(server, path)
        assert status in (403, 404), path
        assert b"SECRET-CONTENT" not in body


def test_missing_pages_get_the_404_page(server: int) -> None:
    status, ctype, body = get(server, "/errors/0000000000000000/")
    assert status == 404 and b"Not found" in body and ctype.startswith("text/html")


def test_not_a_site(tmp_path: Path) -> None:
    with pytest.raises(KBError, match="not a built site"):
        make_server(tmp_path, 0)
