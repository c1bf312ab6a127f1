"""The match index in the answer store (kb/store.py): its entries as a table, each parsed when a
message may be it, with the matcher's tables (kb/explain/tables.py) and each template's folded
words computed when the store is compiled, each table a section read when the matcher first
needs it (a message that matches needs the rare words, the longest parts and the live ids, not
the tables of cut-off messages or of suggestions). A warm `kb explain` reads this, not the index."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from functools import cached_property
from typing import Any

from kb.explain.match import Matcher
from kb.explain.tables import MatchTables, folded_words
from kb.store import Sections, Store

KIND = "match"
_TABLES = {f.name for f in fields(MatchTables)}
_ITEMS = ("longest",)  # read one template at a time


def match_sections(index: dict[str, Any], tables: MatchTables) -> Sections:
    """The sections of a match index checked by kb.explain.index.index_problem."""
    entries = index["entries"]
    s = Sections()
    s.add("head", {"format": index["format"], "release": index.get("release"), "templates": len(tables.usable),
                   "entries": len(entries)})
    s.table("entries", entries)
    for name in sorted(_TABLES):
        value = getattr(tables, name)
        if name in _ITEMS:
            s.table(name, value)
        else:
            s.add(name, value)
    s.add("words", folded_words(entries, tables.usable))
    return s


class StoredTables:
    """The tables of a store, each section read when first asked for."""

    def __init__(self, store: Store, templates: int, entries: int) -> None:
        self._store, self._templates, self._entries = store, templates, entries

    def _list(self, name: str) -> Sequence[Any]:
        value = self._store.table(name) if name in _ITEMS else self._store.json(name)
        if not isinstance(value, Sequence) or len(value) != self._templates:
            raise ValueError(f"section {name}: not one item for each template")
        return value

    def _map(self, name: str) -> Mapping[str, Any]:
        value = self._store.json(name)
        if not isinstance(value, dict):
            raise ValueError(f"section {name}: not a table")
        return value

    @cached_property
    def usable(self) -> Sequence[int]:
        value = self._list("usable")
        if value and (min(value) < 0 or max(value) >= self._entries):
            raise ValueError("section usable: not positions of entries")
        return value

    @cached_property
    def ids(self) -> Sequence[str]:
        return self._list("ids")

    @cached_property
    def longest(self) -> Sequence[str]:
        return self._list("longest")

    @cached_property
    def literal(self) -> Sequence[int]:
        return self._list("literal")

    @cached_property
    def older(self) -> Sequence[bool]:
        return self._list("older")

    @cached_property
    def by_word(self) -> Mapping[str, Sequence[int]]:
        return self._map("by_word")

    @cached_property
    def by_folded_word(self) -> Mapping[str, Sequence[int]]:
        return self._map("by_folded_word")

    @cached_property
    def by_start(self) -> Mapping[str, Sequence[int]]:
        return self._map("by_start")

    @cached_property
    def short_start(self) -> Sequence[int]:
        value = self._store.json("short_start")
        if not isinstance(value, list):
            raise ValueError("section short_start: not a list")
        return value

    @cached_property
    def by_lead(self) -> Mapping[str, Sequence[int]]:
        return self._map("by_lead")

    @cached_property
    def live(self) -> Mapping[str, int]:
        return self._map("live")


def stored_matcher(store: Store) -> Matcher:
    """The matcher of a store. ValueError, TypeError, KeyError or IndexError: not one kb compiled
    (its sections are checked as they are read)."""
    head = store.json("head")
    entries = store.table("entries")
    if head["entries"] != len(entries) or not all(store.has(name) for name in (*_TABLES, "words")):
        raise ValueError("not the sections of a match index")
    index = {"format": head["format"], "release": head["release"], "entries": entries}
    return Matcher(index, StoredTables(store, head["templates"], len(entries)), lambda: store.json("words"))
