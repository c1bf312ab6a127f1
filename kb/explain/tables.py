"""What the matcher looks a message up by, computed once from the match index: for each
matchable template (a "compiled" one, numbered in index order) its longest literal part, and the
tables that find candidates by a rare word, by the start of the message, or by the literal part
after a leading placeholder. Plain JSON-able data: the answer store keeps it (kb/explain/store.py),
so a warm `kb explain` does not compute it again."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional, Protocol

from kb.scan.fit import _WORD, MIN_LITERAL, _anchor_words

START = 8  # a cut-off message is compared with the templates that begin with its first 8 characters
Positions = dict[str, list[int]]


class Tables(Protocol):
    """What the matcher reads of the tables: MatchTables, or the answer store's, read when first used."""

    @property
    def usable(self) -> Sequence[int]: ...
    @property
    def ids(self) -> Sequence[str]: ...
    @property
    def longest(self) -> Sequence[str]: ...
    @property
    def literal(self) -> Sequence[int]: ...
    @property
    def older(self) -> Sequence[bool]: ...
    @property
    def by_word(self) -> Mapping[str, Sequence[int]]: ...
    @property
    def by_folded_word(self) -> Mapping[str, Sequence[int]]: ...
    @property
    def by_start(self) -> Mapping[str, Sequence[int]]: ...
    @property
    def short_start(self) -> Sequence[int]: ...
    @property
    def by_lead(self) -> Mapping[str, Sequence[int]]: ...
    @property
    def live(self) -> Mapping[str, int]: ...


@dataclass(frozen=True)
class MatchTables:
    """`usable`: the index position of each compiled template, in order; the other lists run
    parallel to it; the tables hold compiled numbers."""

    usable: list[int]
    ids: list[str]
    longest: list[str]  # the longest literal part, without a final period (a paste may lack it)
    literal: list[int]  # the entry's literal characters
    older: list[bool]  # the wording of another release
    by_word: Positions  # the rarest whole word of the template ("": it has none, tried on every message)
    by_folded_word: Positions  # the same, in lower case
    by_start: Positions  # by the first START characters of the first literal part
    short_start: list[int]  # those whose first part is shorter: tried on every cut-off message
    by_lead: Positions  # beginning with a placeholder: by the first START characters of the next part
    live: dict[str, int]  # id -> index position of the entry of an error the release raises



def _words(entry: dict[str, Any]) -> set[str]:
    return set(_WORD.findall(" ".join(entry["parts"])))


def _longest(entry: dict[str, Any]) -> str:
    longest: str = max(entry["parts"], key=len)
    return longest[:-1] if longest.endswith(".") else longest


def match_tables(entries: Sequence[dict[str, Any]]) -> MatchTables:
    """The tables of a match index's entries (checked by kb.explain.index.index_problem)."""
    live: dict[str, int] = {}
    for n, e in enumerate(entries):
        if not e.get("older") and not e.get("part"):
            live.setdefault(str(e["id"]), n)
    usable = [n for n, e in enumerate(entries) if e.get("matchable")]  # "{k}: {v}" matches anything: never
    words = [_words(entries[n]) for n in usable]
    frequency: dict[str, int] = {}
    for ws in words:
        for w in ws:
            frequency[w] = frequency.get(w, 0) + 1
    t = MatchTables(usable, [str(entries[n]["id"]) for n in usable], [_longest(entries[n]) for n in usable],
                    [entries[n]["literal"] for n in usable], [bool(entries[n].get("older")) for n in usable],
                    {}, {}, {}, [], {}, live)
    for c, n in enumerate(usable):
        parts = entries[n]["parts"]
        anchors = _anchor_words(parts)
        rare = min(anchors, key=lambda w: (frequency[w], -len(w), w)) if anchors else ""
        t.by_word.setdefault(rare, []).append(c)
        t.by_folded_word.setdefault(rare.lower(), []).append(c)
        first, literal = parts[0], t.literal[c]
        if first and literal >= MIN_LITERAL:
            if len(first) >= START:
                t.by_start.setdefault(first[:START], []).append(c)
            else:
                t.short_start.append(c)
        elif len(parts) > 1 and len(parts[1]) >= START and literal >= MIN_LITERAL:
            t.by_lead.setdefault(parts[1][:START], []).append(c)
    return t


def folded_words(entries: Sequence[dict[str, Any]], usable: Sequence[int]) -> list[list[str]]:
    """The distinct words of each compiled template in lower case (sorted), which `similar` and
    `probably` compare a message's words with."""
    return [sorted({w.lower() for w in _words(entries[n])}) for n in usable]


class Compiled:
    """One matchable template (number `n` of the tables): its index entry and its longest literal
    part, each read when first needed (the answer store parses an entry only when a message may be it)."""

    __slots__ = ("_entries", "_folded", "_t", "n")

    def __init__(self, entries: Sequence[dict[str, Any]], tables: Tables, n: int) -> None:
        self._entries, self._t, self.n = entries, tables, n
        self._folded: Optional[str] = None

    @property
    def entry(self) -> dict[str, Any]:
        return self._entries[self._t.usable[self.n]]

    @property
    def longest(self) -> str:
        return self._t.longest[self.n]

    @property
    def longest_folded(self) -> str:
        if self._folded is None:
            self._folded = self.longest.lower()
        return self._folded


class LiveEntries(Mapping[str, dict[str, Any]]):
    """id -> the index entry of an error the release raises (read when asked for)."""

    def __init__(self, entries: Sequence[dict[str, Any]], tables: Tables) -> None:
        self._entries, self._t = entries, tables

    def __getitem__(self, ident: str) -> dict[str, Any]:
        return self._entries[self._t.live[ident]]

    def __contains__(self, ident: object) -> bool:
        return ident in self._t.live

    def __iter__(self) -> Iterator[str]:
        return iter(self._t.live)

    def __len__(self) -> int:
        return len(self._t.live)
