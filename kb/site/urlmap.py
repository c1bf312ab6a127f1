"""The site's error URLs that have no file of their own, and where each leads: one set of rules,
answered by `kb serve` (kb/site/serve.py), by the hosts that read `/_redirects` (Netlify,
Cloudflare Pages) for the release paths, and by the 404 page's script (templates/notfound.js)
on any static host, under any sub-path:

- `/errors/<slug>/`: the id's page (`/api/slugs.json`);
- `/errors/<id of an older wording>/`: the live page that answers for it, as `kb explain` answers
  a paste of that wording (the match index's `page`: kb/explain/successors.py), with
  `?from=<older id>` (`/api/older-ids/<first digit>.json`);
- `/<release>/errors/<id or slug>/`, for any release: as `/errors/<id or slug>/`. The site
  describes one release, the nearest it has of any other; `?release=<release>` when that is not
  the built one, and the page (static/theme.js) says which release it is for;
- an id that no page answers for: `/search/?q=<id>`.

Releases in paths are checked against kb.urls.RELEASE; nothing else is ever put in a URL."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Optional
from urllib.parse import quote

from kb.files import compact_json
from kb.scan.ids import is_id
from kb.urls import RELEASE, is_release

OLDER_IDS = "api/older-ids"  # <first hex digit>.json: older id -> the live id whose page answers for it
SHARDS = "0123456789abcdef"
# Cloudflare Pages reads at most 100 rules with placeholders (GitLab Pages 1,000 rules in all): the
# newest releases get a rule, the older ones are left to the 404 page's script.
MAX_RELEASE_RULES = 90

# /[<release>/]errors/<id or slug>/, the path unquoted
ERROR_PATH = re.compile(rf"/(?:({RELEASE.pattern})/)?errors/([a-z0-9][a-z0-9-]{{0,199}})/?\Z")


def older_ids(index: Mapping[str, Any]) -> dict[str, str]:
    """Older id -> the live id whose page answers for it, from a match index (kb/explain/index.py):
    the wordings of other releases with a page to go to that is not their own."""
    out: dict[str, str] = {}
    for e in index["entries"]:
        page = e.get("page")
        if e.get("older") and isinstance(page, str) and page != e["id"] and is_id(e["id"]) and is_id(page):
            out[e["id"]] = page
    return out


def older_id_files(older: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    """`/api/older-ids/<c>.json`, one per first hex digit (every one written, `{}` when empty): a
    lookup fetches one sixteenth of the map (about 4.5 KB on 0.34.0)."""
    for c in SHARDS:
        yield f"{OLDER_IDS}/{c}.json", compact_json({k: v for k, v in older.items() if k[0] == c})


def asked(release: Optional[str], built: Optional[str], older: Optional[str] = None) -> str:
    """The query that tells a page which release (when not the built one) and which older id the
    link was for; "" when neither."""
    parts = [f"release={quote(release, safe='')}"] if release and release != built and is_release(release) else []
    parts += [f"from={older}"] if older and is_id(older) else []
    return "?" + "&".join(parts) if parts else ""


def error_target(release: Optional[str], name: str, built: Optional[str], has_page: Callable[[str], bool],
                 slug_id: Callable[[str], Optional[str]], older_id: Callable[[str], Optional[str]]) -> Optional[str]:
    """Where `/[<release>/]errors/<name>/` leads, as a path from the site's root with its query, or
    None when the path is served as it is (a page of its own; an unknown slug gets the 404 page,
    which says so). `built`: the release the site describes (None: a tree that is no release)."""
    if release is not None and not is_release(release):
        return None
    if is_id(name):
        if has_page(name):
            return None if release is None else f"errors/{name}/{asked(release, built)}"
        live = older_id(name)
        if live is not None and is_id(live) and has_page(live):
            return f"errors/{live}/{asked(release, built, name)}"
        return f"search/?q={name}"
    ident = slug_id(name)
    if ident is not None and is_id(ident):
        return f"errors/{ident}/{asked(release, built)}"
    return None if release is None else f"errors/{name}/{asked(release, built)}"


def redirects(releases: Sequence[str], built: Optional[str]) -> str:
    """`/_redirects` (Netlify, Cloudflare Pages): a record's `.json` path, then each release's error
    URLs to this release's page, the built release first, then the newest; every source distinct,
    so no rule hides another. A release not listed (a patch kb does not know, one newer than the
    site) is the 404 page's script's."""
    lines = ["/api/errors/:id.json /api/errors/:id 200"]
    names = [r for r in dict.fromkeys([*([built] if built else []), *reversed(releases)]) if is_release(r)]
    for r in names[:MAX_RELEASE_RULES]:
        lines.append(f"/{r}/errors/:id/ /errors/:id/{asked(r, built)} 302")
    return "\n".join(lines) + "\n"
