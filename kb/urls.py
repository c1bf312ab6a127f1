"""The public URL of the site (`--site-url`): the base of every error page link kb writes or prints."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Optional
from urllib.parse import urlsplit

from kb.errors import UsageError

# Characters a URL never holds raw (RFC 3986): they would have to be percent-encoded.
_NOT_IN_URL = frozenset('<>"`{}|\\^')


SITE_URL_ENV = "KB_SITE_URL"  # the site's URL for the links `kb explain` and `kb search` print


def site_url(value: str, where: str = "--site-url") -> str:
    """`value` without its trailing `/`, when it is an http:// or https:// URL with a host, no
    query and no fragment. A `javascript:` or `data:` URL would become every page's canonical
    link and every printed link; a space or control character would break the lines it is in.
    `where`: what gave it (the option, or the environment variable), named in the error."""
    problem = _problem(value)
    if problem is not None:
        shown = value if len(value) <= 200 else value[:200] + "…"
        raise UsageError(f"{problem} (got {shown!r})", where)
    return value.rstrip("/")


# A vLLM release as the site's URLs hold it (`/0.33.0/errors/<id>/`): digits, then dot-separated
# parts (`0.6.6.post1`, `0.10.1rc1`, `0.8.5+cu121`); the 404 page's script (templates/notfound.js) and
# theme.js test the same pattern. A dot is required: a sub-path such as `/2024/` is no release.
RELEASE = re.compile(r"[0-9]+(?:\.[0-9A-Za-z_+-]+)+")
MAX_RELEASE = 64  # characters


def is_release(text: Optional[str]) -> bool:
    """Whether `text` can stand as the release of an error URL (nothing else is ever put there)."""
    return bool(text) and len(str(text)) <= MAX_RELEASE and RELEASE.fullmatch(str(text)) is not None


def error_url(ident: str, site_url: Optional[str], release: Optional[str] = None) -> str:
    """An error page's URL: `/{release}/errors/{id}/` when the release is given (the site answers
    it with that release's page, or the nearest one it has: README "What the site holds"), else
    `/errors/{id}/` (the newest); under `site_url` when known, else the site's own path. A
    `release` that is no version (a git ref, a wheel's path) is left out. The one place a printed
    page link is made."""
    path = f"/{release}/errors/{ident}/" if release and is_release(release) else f"/errors/{ident}/"
    return f"{site_url.rstrip('/')}{path}" if site_url else path


def printed_site_url(option: Optional[str], environ: Mapping[str, str]) -> Optional[str]:
    """The base of the links a command prints: `--site-url`, else KB_SITE_URL (an empty one is
    unset), validated; None when neither is given (the links stay paths on the site)."""
    if option:
        return site_url(option)
    value = environ.get(SITE_URL_ENV, "")
    return site_url(value, SITE_URL_ENV) if value else None


def _problem(value: str) -> str | None:
    if any(not ch.isprintable() or ch.isspace() or ch in _NOT_IN_URL for ch in value):
        return 'a URL has no spaces, control characters or any of < > " ` { } | \\ ^'
    try:
        parts = urlsplit(value)
        _ = parts.port  # a port that is no number
    except ValueError as e:
        return f"not a URL: {e}"
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return "must be an http:// or https:// URL with a host, e.g. https://errors.example.org"
    if "?" in value or "#" in value:
        return "must have no query or fragment: the pages' paths are added to its end"
    return None
