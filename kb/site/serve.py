"""`kb serve`: a built site on 127.0.0.1 for local browsing, with the API's content types."""

from __future__ import annotations

import http.server
import io
import json
import os
import posixpath
import socket
import sys
import urllib.parse
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, Optional, TypeVar

from kb.errors import KBError, UsageError
from kb.scan.ids import is_id
from kb.site.api import SLUGS
from kb.site.urlmap import ERROR_PATH, OLDER_IDS, error_target

_TYPES = {**http.server.SimpleHTTPRequestHandler.extensions_map,
          ".json": "application/json", ".js": "text/javascript", ".css": "text/css",
          ".html": "text/html; charset=utf-8", ".xml": "application/xml", ".txt": "text/plain; charset=utf-8"}
REQUEST_QUEUE = 1024  # connections the kernel holds while every thread is busy (socketserver's default is 5)
REFUSED = "\0refused"  # translate_path's answer for a path outside the site: no file can have this name
T = TypeVar("T")
IDLE_TIMEOUT = 30.0  # seconds a connection may sit silent: a client that never finishes its request is dropped


class SiteHandler(http.server.SimpleHTTPRequestHandler):
    """Static files of one folder. `/api/...` paths without an extension are JSON; paths
    that leave the folder (`..`, encoded or not, or links pointing out) are refused (403), a
    path no file can have (a NUL byte) is not found (404)."""

    timeout = IDLE_TIMEOUT

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.extensions_map = _TYPES
        super().__init__(*args, **kwargs)

    def _root(self) -> Path:
        return Path(self.directory).resolve()

    def _resolve(self, path: str) -> Optional[Path]:
        """The file a request path names, resolved; None when it leaves the site."""
        parts = [p for p in posixpath.normpath(path).split("/") if p and p not in (".", "..")]
        root = self._root()
        return self._inside(root.joinpath(*parts) if parts else root)

    def _inside(self, path: Path) -> Optional[Path]:
        """`path` resolved (every link followed), or None when that leaves the site."""
        root = self._root()
        full = path.resolve()
        return full if full == root or root in full.parents else None

    def translate_path(self, path: str) -> str:
        """The file to send, resolved after every rewrite: a path that resolves outside the site
        (a link among the site's files) is the refused name, which send_head answers 403."""
        full = self._resolve(urllib.parse.unquote(path.split("?", 1)[0].split("#", 1)[0]))
        if full is not None and full.suffix == ".json" and full.parent.name == "errors" \
                and full.parent.parent == self._root() / "api" and not full.exists():
            # as the site's /_redirects tells Netlify and Cloudflare: one record, two paths
            full = self._inside(full.with_suffix(""))
        return str(full if full is not None else self._root() / REFUSED)

    def _served_inside(self) -> bool:
        """Whether what the standard handler would open for this request (the file, or a
        folder's index page) resolves inside the site, after every rewrite."""
        path = Path(self.translate_path(self.path))
        if path == self._root() / REFUSED:
            return False
        if path.is_dir():
            return all(self._inside(path / name) is not None for name in ("index.html", "index.htm")
                       if (path / name).exists() or (path / name).is_symlink())
        return True

    def send_head(self) -> io.BytesIO | BinaryIO | None:
        raw = urllib.parse.unquote(self.path.split("?", 1)[0].split("#", 1)[0])
        if "\0" in raw:
            self.send_error(404, "File not found")
            return None
        try:
            inside = ".." not in raw.split("/") and self._resolve(raw) is not None
        except (OSError, RuntimeError):  # a link loop, a name too long
            self.send_error(404, "File not found")
            return None
        try:
            inside = inside and self._served_inside()
        except (OSError, RuntimeError):
            self.send_error(404, "File not found")
            return None
        if not inside:
            self.send_error(403, "Path outside the site")
            return None
        target = self._error_target(raw)
        if target is not None:
            self.send_response(302)  # not 301: a rebuild (a new release) may answer with another page
            self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        return super().send_head()

    def _error_target(self, raw: str) -> Optional[str]:
        """An error URL without a file of its own (/errors/<slug>/, an older id, a release's path:
        kb/site/urlmap.py), answered as the site's 404 page answers it on a static host: the path
        to redirect to; None for every other path. The site is served at /."""
        m = ERROR_PATH.match(raw)
        if m is None:
            return None
        try:
            full = self._resolve(raw)
            if full is not None and full.exists():
                return None
        except (OSError, RuntimeError):  # a name too long, a link loop: no error's
            return None
        root = self._root()
        target = error_target(m.group(1), m.group(2), _built(root / RELEASES),
                              lambda ident: (root / "errors" / ident / "index.html").is_file(),
                              _map(root / SLUGS).get, lambda ident: _map(root / OLDER_IDS / f"{ident[0]}.json").get(ident))
        return "/" + target if target is not None else None

    def list_directory(self, path: str | os.PathLike[str]) -> Optional[io.BytesIO]:
        """A folder without an index page is not found: the site has no listings to show."""
        self.send_error(404, "File not found")
        return None

    def guess_type(self, path: str | os.PathLike[str]) -> str:
        full = Path(path)
        rel = full.relative_to(self._root()).as_posix() if full.is_relative_to(self._root()) else ""
        if rel.startswith("api/") and "." not in rel.rsplit("/", 1)[-1]:
            return "application/json"
        return super().guess_type(path)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        try:
            page = self._resolve("/404.html")  # None when it is a link pointing out of the site
        except (OSError, RuntimeError):
            page = None
        if code == 404 and page is not None and page.is_file():
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


RELEASES = "api/releases.json"  # its `built`: the release the site describes
_cache: dict[str, tuple[tuple[int, int], Any]] = {}  # path -> (its mtime and size when read, what it held)


def _read(path: Path, parse: Callable[[Any], T]) -> T:
    """`parse` of the JSON file at `path`, read once per version of the file; `parse(None)` when it
    is missing or no JSON."""
    try:
        st = path.stat()
    except OSError:
        return parse(None)
    key = (st.st_mtime_ns, st.st_size)
    cached = _cache.get(str(path))
    if cached is not None and cached[0] == key:
        return cached[1]  # type: ignore[no-any-return]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = None
    value = parse(data)
    _cache[str(path)] = (key, value)  # one assignment: a thread reads the old pair or the new one
    return value


def _ids(data: Any) -> dict[str, str]:
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str) and is_id(v)} \
        if isinstance(data, dict) else {}


def _map(path: Path) -> dict[str, str]:
    """name -> id of a site's api/slugs.json or api/older-ids/<c>.json; {} when it is missing or
    not a JSON object of id strings."""
    return _read(path, _ids)


def _built(path: Path) -> Optional[str]:
    """The release a site describes (api/releases.json's `built`), None when not known."""
    return _read(path, lambda d: d["built"] if isinstance(d, dict) and isinstance(d.get("built"), str) else None)


class SiteServer(http.server.ThreadingHTTPServer):
    """One thread per connection, a deep listen queue, and one line (never a traceback) for a
    request that fails; a client that goes away is not an error."""

    request_queue_size = REQUEST_QUEUE
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, socket.timeout)):
            return
        print(f"Error: request from {client_address[0]} failed: {type(error).__name__}: {error}", file=sys.stderr)


def make_server(folder: Path, port: int = 8000, host: str = "127.0.0.1") -> SiteServer:
    if not 0 <= port <= 65535:
        raise UsageError(f"--port must be between 0 and 65535 (0: any free port), got {port}")
    if not (folder / "index.html").is_file():
        raise KBError("not a built site (no index.html); run `kb build` first", str(folder))
    handler = partial(SiteHandler, directory=str(folder.resolve()))
    try:
        return SiteServer((host, port), handler)
    except OSError as e:
        raise KBError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
