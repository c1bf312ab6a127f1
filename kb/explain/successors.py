"""Which live error answers for the wording of an error the release no longer raises.

The release history (kb/releases/wording.py) follows an error whose message was edited or moved
a little; an error vLLM rewrote in another place (the V0 engine's checks, made again by the V1
engine) ends there as "removed". Yet users paste those messages every day, and the page that helps
them is the live error's. In order:

1. `successor`: the history's edits (`next`) lead to a live id (an edit back to an earlier
   wording leaves a loop the shipped `current` does not follow).
2. `same`: the same message text is raised by the release (at another site), or was an older
   wording of an error the release raises. A fact of the sources.
3. `declared`: a curated entry of a live error says it `supersedes` the removed one (an id of any
   wording of its history; `kb lint` checks each id against the shipped wordings).
4. `same`, further: another wording of the removed error's own history is such a message.

Among several live errors, one whose page has a fix comes first, then a curated one, then by id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

from kb.model import Record, Wording
from kb.releases.lineage import release_key
from kb.scan.literals import literal_parts, matchable

SAME, DECLARED, SUCCESSOR = "same", "declared", "successor"
MIN_SAME_LITERAL = 8  # literal characters a message needs to be told the same (as the matcher's MIN_LITERAL)


def _text(template: str) -> Optional[tuple[str, ...]]:
    """The literal text the lookup compares, or None when it is too short to tell two errors apart."""
    parts, _ = literal_parts(template)
    if not matchable(parts) or sum(len(p) for p in parts) < MIN_SAME_LITERAL:
        return None
    return tuple(parts)


def _rank(r: Record) -> tuple[bool, bool, str]:
    """A live error whose page has a fix first (curated solutions, or a derived fix), then a curated one."""
    has_fix = bool(r.entry is not None and r.entry.solutions) or bool(
        r.derived is not None and r.derived.fix is not None)
    return (not has_fix, not r.curated, r.id)


def next_live(w: Wording, by_id: Mapping[str, Wording], live: Mapping[str, Record]) -> Optional[Record]:
    """The live error an edited wording became, following `next` (the id each edit led to) through
    the history, however the chain was computed: a message edited back to an earlier wording
    (0.8.5 -> 0.9.2 -> 0.12.0) leaves a loop the shipped `current` does not follow."""
    seen = {w.id}
    ident = w.next
    while ident and ident not in seen:
        if ident in live:
            return live[ident]
        seen.add(ident)
        later = by_id.get(ident)
        ident = later.next if later is not None else ""
    return None


def declared(records: Sequence[Record]) -> dict[str, Record]:
    """Removed id -> the live error whose curated entry says it supersedes it (the first by id)."""
    out: dict[str, Record] = {}
    for r in sorted(records, key=lambda r: r.id):
        if r.removed_since is None and r.entry is not None:
            for old in r.entry.supersedes:
                out.setdefault(old, r)
    return out


def removed_answers(records: Sequence[Record], wordings: Sequence[Wording]) -> dict[str, tuple[Record, str]]:
    """Wording id -> (the live error whose page answers for it, how: `successor` through the
    history's edits, `same` or `declared`), for each wording with no current id the release raises."""
    live = {r.id: r for r in records if r.removed_since is None}
    by_text: dict[tuple[str, ...], Record] = {}  # the release's own messages
    for r in live.values():
        key = _text(r.template)
        if key is not None and (key not in by_text or _rank(r) < _rank(by_text[key])):
            by_text[key] = r
    by_older_text: dict[tuple[str, ...], Record] = {}  # older wordings of errors the release raises
    for w in wordings:
        now = live.get(w.current) if w.current else None
        key = _text(w.template) if now is not None else None
        if now is not None and key is not None and (key not in by_older_text or _rank(now) < _rank(by_older_text[key])):
            by_older_text[key] = now
    chains: dict[str, list[Wording]] = {}
    for w in wordings:
        chains.setdefault(w.chain or w.id, []).append(w)
    by_declared = declared(records)

    def same_text(w: Wording) -> Optional[Record]:
        key = _text(w.template)
        if key is None:
            return None
        return by_text.get(key) or by_older_text.get(key)

    by_id = {w.id: w for w in wordings}
    out: dict[str, tuple[Record, str]] = {}
    for w in wordings:
        if w.id in live or (w.current and w.current in live):
            continue
        edited = next_live(w, by_id, live)
        if edited is not None:
            out[w.id] = (edited, SUCCESSOR)
            continue
        history = chains.get(w.chain or w.id, [w])
        found = same_text(w)
        if found is not None:
            out[w.id] = (found, SAME)
            continue
        claimed = [by_declared[h.id] for h in history if h.id in by_declared]
        if claimed:
            out[w.id] = (min(claimed, key=_rank), DECLARED)
            continue
        # another wording of its own history is a live message (the newest first)
        for h in sorted(history, key=lambda h: (release_key(h.last) or (), h.id), reverse=True):
            found = same_text(h)
            if found is not None:
                out[w.id] = (found, SAME)
                break
    return out
