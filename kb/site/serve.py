"""`kb serve`: a built site on 127.0.0.1 for local browsing, with the API's content types."""

from __future__ import annotations

import http.server
import io
import os
import posixpath
import urllib.parse
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

from kb.errors import KBError

_TYPES = {**http.server.SimpleHTTPRequestHandler.extensions_map,
          ".json": "application/json", ".js": "text/javascript", ".css": "text/css",
          ".html": "text/html; charset=utf-8", ".xml": "application/xml", ".txt": "text/plain; charset=utf-8"}


class SiteHandler(http.server.SimpleHTTPRequestHandler):
    """Static files of one folder. `/api/...` paths without an extension are JSON; paths
    that leave the folder (`..`, encoded or not, or links pointing out) are refused."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.extensions_map = _TYPES
        super().__init__(*args, **kwargs)

    def translate_path(self, path: str) -> str:
        path = urllib.parse.unquote(path.split("?", 1)[0].split("#", 1)[0])
        parts = [p for p in posixpath.normpath(path).split("/") if p and p not in (".", "..")]
        root = Path(self.directory).resolve()
        full = root.joinpath(*parts).resolve() if parts else root
        if full != root and root not in full.parents:
            return str(root / "\0refused")  # never opened: does not exist
        return str(full)

    def send_head(self) -> io.BytesIO | BinaryIO | None:
        raw = urllib.parse.unquote(self.path.split("?", 1)[0])
        if ".." in raw.split("/"):
            self.send_error(403, "Path outside the site")
            return None
        return super().send_head()

    def guess_type(self, path: str | os.PathLike[str]) -> str:
        rel = Path(path).resolve().relative_to(Path(self.directory).resolve()).as_posix() \
            if Path(path).resolve().is_relative_to(Path(self.directory).resolve()) else ""
        if rel.startswith("api/") and "." not in rel.rsplit("/", 1)[-1]:
            return "application/json"
        return super().guess_type(path)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        page = Path(self.directory) / "404.html"
        if code == 404 and page.is_file():
            body = page.read_bytes()
            self.send_response(404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            return
        super().send_error(code, message, explain)

    def log_message(self, format: str, *args: object) -> None:
        if os.environ.get("KB_SERVE_LOG"):
            super().log_message(format, *args)


def make_server(folder: Path, port: int = 8000, host: str = "127.0.0.1") -> http.server.ThreadingHTTPServer:
    if not (folder / "index.html").is_file():
        raise KBError("not a built site (no index.html); run `kb build` first", str(folder))
    handler = partial(SiteHandler, directory=str(folder.resolve()))
    try:
        return http.server.ThreadingHTTPServer((host, port), handler)
    except OSError as e:
        raise KBError(f"cannot listen on {host}:{port}: {e.strerror}") from None
