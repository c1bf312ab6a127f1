"""The public URL of the site (`--site-url`): the base of every error page link kb writes or prints."""

from __future__ import annotations

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
