"""Choose the edit threshold of the lookup's `probably` answers on two labelled sets.

Edits: every message vLLM edited between two published releases in the same file and function
(the release history's `edited` changes, read from the wheels). The old wording, filled with
sample values, is aligned with the next release's own templates: only the edited one is right.

Unknown errors: every template of the pinned release, filled, aligned with all the *other*
templates of the release (its own and those of the same text left out): any answer is wrong,
since two templates of one release are two errors.

For each threshold the bench prints right / wrong / none for both: the shipped FUZZY_EDITS is
the largest with no wrong answer.

    python bench/fuzzy.py
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kb.explain import match as m  # noqa: E402
from kb.explain.index import _text  # noqa: E402
from kb.jobs import scan_release  # noqa: E402
from kb.model import ScanResult  # noqa: E402
from kb.releases.history import build_history  # noqa: E402
from kb.releases.published import published_releases  # noqa: E402
from kb.scan.source import SourceSpec  # noqa: E402

SHIPPED = m.FUZZY_EDITS
THRESHOLDS = (0.0, 0.02, 0.03, 0.04, 0.05, 0.08, 0.10, 0.12, 0.14, 0.16, 0.18, 0.20, 0.25, 0.30)


def own_matcher(scan: ScanResult) -> m.Matcher:
    entries = []
    for s in scan.sites:
        entries.append({"id": s.id, "title": s.template[:60], "cls": s.exception_class, "file": s.file,
                        "line": s.line, "func": s.fact.qualname, "curated": False} | _text(s.template))
    return m.Matcher({"format": m.MATCH_FORMAT, "release": scan.tree.release, "entries": entries})


def weight(entry: dict[str, Any]) -> int:
    return sum(m.WORD_COST if t[0].isalnum() or t[0] == "_" else m.SIGN_COST
               for t in m._template_tokens(entry) if t is not None)


def candidates(matcher: m.Matcher, text: str, leave_out: frozenset[str] = frozenset()) -> list[tuple[str, float]]:
    """The `probably` answers for a text (id, share of the template's weight edited), best first."""
    out = []
    for x in matcher.probably(m.unwrap(text)):
        if x.id not in leave_out:
            w = weight(x.entry)
            out.append((x.id, (w - x.score) / w))
    return out


def verdicts(queries: list[tuple[list[tuple[str, float]], str | None]], threshold: float,
             words: dict[str, tuple[str | None, ...]]) -> tuple[int, int, int]:
    """An answer is right when it names the wanted id or a template of the same literal words
    (one message raised in several places, told apart by nothing in the text)."""
    right = wrong = none = 0
    for cands, want in queries:
        best = next((i for i, share in cands if share <= threshold), None)
        if best is None:
            none += 1
        elif want is not None and (best == want or words[best] == words[want]):
            right += 1
        else:
            wrong += 1
    return right, wrong, none


def main() -> None:
    releases = published_releases()
    scans = [(r, scan_release(SourceSpec(vllm_version=r))) for r in releases]
    history = build_history(scans)
    by_name = dict(scans)
    rng = random.Random(0)
    m.FUZZY_EDITS = max(THRESHOLDS)  # collect every candidate up to the largest threshold
    m.FUZZY_CANDIDATES = 12
    edits: list[tuple[list[tuple[str, float]], str | None]] = []
    words: dict[str, tuple[str | None, ...]] = {}
    whole_edits = 0
    for _, scan in scans:
        for site in scan.sites:
            words[site.id] = tuple(m._template_tokens(_text(site.template)))
    for d in history.diffs:
        old, new = by_name[d.old or ""], by_name[d.new]
        matcher = own_matcher(new)
        templates = {s.id: s.template for s in old.sites}
        for c in d.of("edited"):
            entry = _text(templates[c.old or ""])
            if not entry["matchable"]:
                continue
            text = m.fill(entry, rng)
            if matcher.match(text) or matcher.truncated(m.unwrap(text)):
                whole_edits += 1  # the old text is a message of the new release as it is
                continue
            edits.append((candidates(matcher, text), c.new))
    pinned = scans[-1][1]
    matcher = own_matcher(pinned)
    same: dict[tuple[str | None, ...], set[str]] = {}  # templates of the same words (case and spacing aside)
    for s in pinned.sites:
        same.setdefault(words[s.id], set()).add(s.id)
    unknown: list[tuple[list[tuple[str, float]], str | None]] = []
    whole = 0
    for s in sorted({s.id: s for s in pinned.sites}.values(), key=lambda s: s.id):
        entry = _text(s.template)
        if not entry["matchable"]:
            continue
        text, left_out = m.fill(entry, rng), frozenset(same[words[s.id]])
        if any(x.id not in left_out for x in matcher.match(text) + matcher.truncated(m.unwrap(text))):
            whole += 1  # another template matches the text as it is: not a question for the alignment
            continue
        unknown.append((candidates(matcher, text, left_out), None))
    print(f"{len(edits)} edited messages ({whole_edits} more read as another message of the next release), "
          f"{len(unknown)} unknown errors (templates of {pinned.tree.release}; "
          f"{whole} more match another template whole)")
    for t in THRESHOLDS:
        e, u = verdicts(edits, t, words), verdicts(unknown, t, words)
        mark = "  <- shipped" if abs(t - SHIPPED) < 1e-9 else ""
        print(f"  threshold {t:.2f}: edits right {e[0]}, wrong {e[1]}, none {e[2]};"
              f" unknown wrong {u[1]}, none {u[2]}{mark}")


if __name__ == "__main__":
    main()
