"""Every wording of every error across releases: ids, templates, where and when they were
raised, and what became of them (the current id, or removed since). No source is kept: the
lookup needs only this to recognise a message of any release.

The wordings of the published releases ship with kb (`wordings.json.gz`, made by
`kb wordings` from the real wheels), so that a build of one release, on a fresh machine,
already knows the older wording of its errors."""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Optional

from kb.errors import KBError
from kb.files import gzip_text
from kb.model import Appearance, ScanResult, Wording
from kb.releases.history import History

SHIPPED = Path(__file__).with_name("wordings.json.gz")
FORMAT = "kb-wordings/2"


def wordings(scans: Sequence[tuple[str, ScanResult]], history: History) -> tuple[Wording, ...]:
    """One wording per id of any release (scans oldest first, as for `build_history`)."""
    where: dict[str, tuple[int, str, str]] = {}  # id -> (line, function, class) in the last release raising it
    for _, scan in scans:
        for s in scan.sites:
            if s.id not in where or where[s.id][0] != s.line:
                where[s.id] = (s.line, s.fact.qualname, s.exception_class)
    out: list[Wording] = []
    for current, appearances in history.appearances.items():
        removed = history.removed.get(current)
        by_id: dict[str, list[str]] = {}
        last_of: dict[str, Appearance] = {}
        for a in appearances:
            by_id.setdefault(a.id, []).append(a.release)
            last_of[a.id] = a
        for ident, releases in by_id.items():
            a = last_of[ident]
            line, function, cls = where[ident]
            ended = history.aliases[ident][2] if ident in history.aliases else removed
            out.append(Wording(ident, a.template, a.file, line, function, cls, releases[0], releases[-1],
                               None if removed else current, ended, current))
    return tuple(sorted(out, key=lambda w: w.id))


def dumps(items: Sequence[Wording], releases: Sequence[str]) -> bytes:
    """Deterministic gzip of the compact JSON (no file name, no time in the header)."""
    rows = [[w.id, w.template, w.file, w.line, w.function, w.exception_class, w.first, w.last, w.current,
             w.ended_in, w.chain] for w in items]
    text = json.dumps({"format": FORMAT, "releases": list(releases), "wordings": rows}, ensure_ascii=False,
                      separators=(",", ":"), sort_keys=True)
    return gzip_text(text)


@lru_cache(maxsize=4)
def load(path: Path = SHIPPED) -> tuple[tuple[str, ...], tuple[Wording, ...]]:
    """(releases it was made from, oldest first; the wordings). Empty when there is no file.
    Read once per process: jobs over many releases ask for it each time."""
    if not path.is_file():
        return (), ()
    try:
        data = json.loads(gzip.decompress(path.read_bytes()))
        if data.get("format") != FORMAT:
            raise ValueError(f"not {FORMAT}")
        items = tuple(Wording(*row) for row in data["wordings"])
        return tuple(data["releases"]), items
    except (OSError, ValueError, KeyError, TypeError, EOFError, gzip.BadGzipFile) as e:
        raise KBError(f"not a readable wordings file: {e}", str(path)) from None


def for_release(release: Optional[str], items: tuple[Wording, ...] = (), releases: tuple[str, ...] = ()) -> \
        tuple[Wording, ...]:
    """The shipped wordings, when they describe this release as the newest (its current ids are
    the build's ids); none otherwise."""
    if not items and not releases:
        releases, items = load()
    return items if releases and release == releases[-1] else ()
