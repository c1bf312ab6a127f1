"""A release's match index from what ships with kb, without its wheel: the wordings of every
published release (kb/releases/wordings.json.gz: each id's template, class, function and the
releases that raise it) and the curated entries' first fixes. What the vLLM plugin answers from
when kb's cache has no answer store for the release (kb/vllm_plugin/answer.py): no scan, no
download. It says less than a release's own index: no derived guidance (so no fix for the user's
own values), no meaning, no parts of messages; an error with a curated entry has its first fix."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from kb.explain.index import MATCH_FORMAT, wording_entry
from kb.model import Wording


def nearest_release(name: Optional[str], releases: Sequence[str]) -> Optional[str]:
    """`name` when it is one of `releases` (oldest first), else the newest of them before it (a
    patch or a development build of a release kb knows: the nearest code), else the oldest;
    the newest for a name that is no version. None when there are none."""
    from kb.releases.lineage import release_key

    if not releases:
        return None
    if name in releases:
        return name
    key = release_key(name) if name else None
    if key is None:
        return releases[-1]
    before = [r for r in releases if (release_key(r) or ()) <= key]
    return max(before, key=lambda r: release_key(r) or ()) if before else releases[0]


def shipped_index(release: str, errors: Path,
                  shipped: Optional[tuple[tuple[str, ...], tuple[Wording, ...]]] = None) -> dict[str, Any]:
    """The match index of `release`, one of the shipped wordings' releases (`shipped`: the
    releases and wordings, kb/releases/wording.py `load()` by default), with the first fix of
    each curated entry of `errors` on the ids of its error (an entry written for an older id
    lands on the id the release raises, by the wordings' history). KeyError: not such a release."""
    from kb.releases.wording import load

    releases, items = shipped if shipped is not None else load()
    order = {r: i for i, r in enumerate(releases)}
    at = order[release]
    fixes = _first_fixes(errors, items)
    entries = []
    for w in items:
        first, last = order.get(w.first), order.get(w.last)
        if first is None or last is None or not first <= at <= last:
            continue
        entry = wording_entry(w)
        fix = fixes.get(w.id) or fixes.get(entry["chain"])
        entries.append(entry | {"curated": fix is not None} | ({"solution": fix} if fix is not None else {}))
    return {"format": MATCH_FORMAT, "release": release, "entries": entries}


def _first_fixes(errors: Path, items: Sequence[Wording]) -> dict[str, str]:
    """Each curated entry's first fix (Markdown) by its id and by its error's chain (the last id
    of its history)."""
    from kb.entries.load import load_entries

    by_id = {w.id: w for w in items}
    out: dict[str, str] = {}
    for e in load_entries(errors).entries:
        if not e.solutions:
            continue
        out.setdefault(e.id, e.solutions[0])
        w = by_id.get(e.id)
        if w is not None:
            out.setdefault(w.chain or w.current or w.id, e.solutions[0])
    return out
