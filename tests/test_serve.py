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
    (site.parent / "secret-dir").mkdir()
    (site.parent / "secret-dir" / "index.html").write_text("SECRET-CONTENT")
    (site / "out.txt").symlink_to(site.parent / "secret.txt")  # links in the site pointing out
    (site / "static" / "out").symlink_to(site.parent / "secret-dir")
    (site / "loop").symlink_to(site / "loop")
    (site / "inside.css").symlink_to(site / "static" / "style.css")
    (site / "api" / "errors" / "linkout").symlink_to(site.parent / "secret.txt")  # found through the .json rewrite
    (site / "indexout").mkdir()  # a folder whose index page is a link pointing out
    (site / "indexout" / "index.html").symlink_to(site.parent / "secret.txt")
    (site / "bare").mkdir()  # a folder without an index page: no listing
    (site / "bare" / "a.txt").write_text("inside")
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
    status, ctype, body = get(server, "/browse/no-such-list/")  # an unknown id goes to the search: test_url_scheme.py
    assert status == 404 and b"Not found" in body and ctype.startswith("text/html")


def head_of(port: int, path: str) -> tuple[int, list[tuple[str, str]]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path)
    resp = conn.getresponse()
    resp.read()
    conn.close()
    return resp.status, resp.getheaders()


SLUG = "the-model-s-number-of-query-heads-per-kv-head"


def test_a_slug_redirects_to_its_id_page(server: int) -> None:
    status, headers = head_of(server, f"/errors/{SLUG}/")
    assert status == 302 and dict(headers)["Location"] == f"/errors/{DCP}/"
    for missing in ["/errors/no-such-slug/", f"/static/errors/{SLUG}/",
                    "/errors/" + "a" * 300 + "/"]:
        assert get(server, missing)[0] == 404, missing


def test_a_slug_path_cannot_redirect_elsewhere_or_add_headers(server: int) -> None:
    for path in [f"/%0d%0aSet-Cookie:%20pwn=1/errors/{SLUG}/", f"/%5C127.0.0.1:1/errors/{SLUG}/",
                 f"//127.0.0.1:1/errors/{SLUG}/", f"/%E2%98%83/errors/{SLUG}/"]:
        status, headers = head_of(server, path)
        assert status == 404, path
        assert not any(k.lower() in ("location", "set-cookie") for k, _ in headers), path


def test_a_404_page_pointing_out_of_the_site_is_not_served(tmp_path: Path) -> None:
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text("<!doctype html>")
    (tmp_path / "secret.html").write_text("SECRET-CONTENT")
    (tmp_path / "site" / "404.html").symlink_to(tmp_path / "secret.html")
    srv = make_server(tmp_path / "site", 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        status, _, body = get(srv.server_address[1], "/missing/")
    finally:
        srv.shutdown()
        srv.server_close()
    assert status == 404 and b"SECRET-CONTENT" not in body


def test_not_a_site(tmp_path: Path) -> None:
    with pytest.raises(KBError, match="not a built site"):
        make_server(tmp_path, 0)


@pytest.mark.parametrize("path, status", [
    ("/%00", 404), ("/errors/%00/", 404), ("/%00/../secret.txt", 404), ("/api/errors/x%00.json", 404),
    ("/out.txt", 403), ("/static/out/", 403), ("/static/out/index.html", 403), ("/static/out", 403),
    ("/loop", 404), ("/" + "a" * 5000, 404),
    ("/api/errors/linkout.json", 403), ("/api/errors/linkout", 403), ("/indexout/", 403), ("/indexout", 403),
    ("/bare/", 404),
])
def test_hostile_paths_get_a_status_not_an_empty_reply(server: int, path: str, status: int, capfd) -> None:
    got, _, body = get(server, path)
    assert got == status, path
    assert b"SECRET-CONTENT" not in body
    assert "Traceback" not in capfd.readouterr().err


def test_links_inside_the_site_are_served(server: int) -> None:
    status, ctype, body = get(server, "/inside.css")
    assert status == 200 and ctype == "text/css" and body


def test_many_concurrent_clients_are_all_answered(server: int) -> None:
    """50 clients at once, each connecting anew: none is refused or left waiting (the listen queue
    is deep; socketserver's default of 5 drops connections, answered after SYN retries or never)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=50) as pool:
        statuses = list(pool.map(lambda _: get(server, "/")[0], range(400)))
    assert statuses == [200] * 400


def test_the_listen_queue_holds_many_waiting_connections(tmp_path: Path) -> None:
    """While every thread is busy, new connections wait in the kernel's queue instead of being
    dropped (socketserver's default queue of 5 drops the 7th: its connect never completes)."""
    import socket

    (tmp_path / "index.html").write_text("<!doctype html>")
    srv = make_server(tmp_path, 0)  # never accepts: as if every thread were busy
    waiting = []
    try:
        for _ in range(100):  # within any kernel's cap (somaxconn is 128 or more)
            waiting.append(socket.create_connection(srv.server_address, timeout=20))
    finally:
        for s in waiting:
            s.close()
        srv.server_close()
    assert len(waiting) == 100


@pytest.mark.parametrize("port", [-1, 65536, 10**20])
def test_a_port_out_of_range_is_a_usage_error(capsys, tmp_path: Path, port: int) -> None:
    from kb.cli import main

    (tmp_path / "index.html").write_text("<!doctype html>")
    assert main(["serve", str(tmp_path), "--port", str(port)]) == 2
    assert capsys.readouterr().err.strip().endswith(
        f"Error: --port must be between 0 and 65535 (0: any free port), got {port}")


def test_a_busy_port_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text("<!doctype html>")
    srv = make_server(tmp_path, 0)
    try:
        with pytest.raises(KBError, match=f"cannot listen on 127.0.0.1:{srv.server_address[1]}: "):
            make_server(tmp_path, srv.server_address[1])
    finally:
        srv.server_close()
