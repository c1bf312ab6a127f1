"""What the home page shows, from the records (pure): the errors users hit most, ordered by their
public reports, each with the first sentence of what it means; the site's counts; the list of every
curated error, which has pages of its own (/curated/)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kb.entries.markdown import ERROR_ID
from kb.entries.sentences import first_sentence_end
from kb.model import Record, ScanResult
from kb.records.present import title_key
from kb.records.reports import MAX_REPORTS
from kb.site.views import Summary

TOP_ERRORS = 15
GIST_CHARS = 180  # the one line of meaning, cut at a word past this


@dataclass(frozen=True)
class TopError:
    id: str
    title: str
    gist: str  # Markdown: the first sentence of its curated meaning
    reports: int  # public reports a record keeps: at most MAX_REPORTS
    more: bool  # it may have more reports than it keeps (reports == MAX_REPORTS)


def top_errors(records: Sequence[Record], limit: int = TOP_ERRORS) -> list[TopError]:
    """The curated errors with public reports, the most reported first (then by title)."""
    reported = sorted((r for r in records if r.entry is not None and r.reports and r.removed_since is None),
                      key=lambda r: (-len(r.reports), title_key(r.title), r.id))
    return [TopError(r.id, r.title, first_sentence(r.entry.meaning if r.entry else ""), len(r.reports),
                     len(r.reports) >= MAX_REPORTS) for r in reported[:limit]]


def first_sentence(markdown: str, limit: int = GIST_CHARS) -> str:
    """The first sentence of Markdown prose on one line, where kb/entries/sentences.py says it ends
    (a `.`, `?` or `!` outside code spans, not "e.g." or "..."); past `limit` characters cut at a
    space outside code spans, with "…"."""
    text = " ".join(markdown.split())
    end = first_sentence_end(text, limit + 1, code_spans=True)
    if end >= 0:
        return text[:end]
    if len(text) <= limit:
        return text
    spaces, code = [], False  # outside code spans
    for i, c in enumerate(text):
        code ^= c == "`"
        if c == " " and not code:
            spaces.append(i)
    cut = max((i for i in spaces if i <= limit), default=next(iter(spaces), -1))
    return text if cut <= 0 else text[:cut].rstrip(",;:") + " …"


def home_counts(scan: ScanResult, records: Sequence[Record]) -> dict[str, int]:
    """What the home page counts, of the errors the release raises (`records`, removed ones left out):
    errors, raise sites, the files that raise them and those scanned, curated errors."""
    return {"ids": len(records), "sites": sum(len(r.sites) for r in records),
            "files": len({r.file for r in records}), "scanned": scan.counts.get("files", 0),
            "curated": sum(1 for r in records if r.curated)}


def gist_cites(top: Sequence[TopError], summaries: dict[str, Summary]) -> list[Summary]:
    """The errors with a page that the gists cite by id (they become links, as on error pages)."""
    found = dict.fromkeys(m.group(0) for t in top for m in ERROR_ID.finditer(t.gist))
    return [summaries[i] for i in found if i in summaries]
