"""A pasted error message, traceback or whole log -> the vLLM errors it contains.

Matching runs over the compiled match index (the same one the site's search reads):
each template's literal parts with placeholders between them. A message is first unwrapped
from what users paste around it (log prefixes, ANSI colours, `ValueError: `, pydantic's
`ValidationError ... Value error, <message> [type=value_error ...]`), then matched:
exactly (the whole message), contained in a longer text, or cut off at the end. Candidates
are found through rare words of each template, so a 10 MB log takes seconds. When nothing
matches, the closest templates are offered with a similarity score, never as an answer.

Each error found gets its first answer (`Found.answer`): the page of an error the release raises,
the match's own or the one an older wording leads to (kb/explain/successors.py), a page with a fix
first among sites raising one message. Text and JSON output: kb/explain/output.py; the paste's
messages and clues: messages.py; matching a template's parts: fit.py; edited wording: fuzzy.py.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

from kb.errors import KBError
from kb.explain.fuzzy import (
    FUZZY_CANDIDATES,
    FUZZY_EDITS,
    FUZZY_MAX_TOKENS,
    FUZZY_MIN_TOKENS,
    FUZZY_MIN_WORDS,
    _aligned_values,
    _template_tokens,
    _tokens,
    _weight,
    align,
    differences,
)
from kb.explain.index import MATCH_FORMAT, index_problem
from kb.explain.messages import MAX_MESSAGE, NO_CLUES, Clues, clues_of, iter_messages, log_messages, unwrap
from kb.explain.tables import START, Compiled, LiveEntries, Tables, folded_words, match_tables
from kb.files import read_text
from kb.scan.fit import _MAX_LEAD, _WORD, MIN_LITERAL, _clean_edges, _cut_inside, _lead_end, _lead_value, contained, fit

SUCCESSOR = "successor"

MIN_SIMILARITY = 0.2  # below this a suggestion is noise
_START = START  # a cut-off message is compared with the templates that begin with its first 8 characters


@dataclass(frozen=True)
class Match:
    entry: dict[str, Any]
    kind: str  # exact, contained, truncated, similar
    score: float  # literal characters matched (similarity for `similar`)
    values: tuple[tuple[str, str], ...] = ()
    differences: tuple[str, ...] = ()  # for `probably`: what differs from the template

    @property
    def id(self) -> str:
        return str(self.entry["id"])


@dataclass(frozen=True)
class Found:
    line: int  # 1-based line of the input where the message starts
    message: str  # the unwrapped, normalised message
    best: Match
    others: tuple[Match, ...] = ()  # less specific templates that match too
    count: int = 1  # occurrences of the same error with the same values
    # for the wording of a removed error: the current error closest to it (the one that answers for
    # it, else the most similar one by words)
    closest: Optional[Match] = None
    answer: Optional[Answer] = None  # the error the release raises whose page answers first; None: no live page


@dataclass(frozen=True)
class Answer:
    """The first answer to a found message: an error the release raises (its index entry), and how
    the message the user pasted leads to it: `own` (it is this error's message), `successor` (an
    older wording of it: the release history followed the message), `same` (the same message is
    raised today at this site, or was an older wording of this error), `declared` (a curated entry
    says this error supersedes the removed one)."""

    entry: dict[str, Any]
    via: str

    @property
    def id(self) -> str:
        return str(self.entry["id"])


@dataclass(frozen=True)
class Explanation:
    found: tuple[Found, ...]
    suggestions: tuple[Match, ...] = ()  # when nothing matched: the closest templates
    notes: tuple[str, ...] = ()  # what was not read or not listed (a long input cut, errors beyond MAX_FOUND)
    release: Optional[str] = None  # the release the index is of (its pages' links name it); None: a tree that is none


class Matcher:
    """The index, ready to match: a rare word of each template indexed (kb/explain/tables.py).
    `tables` and `words` (the folded words of each compiled template) are computed from the index
    unless given: the answer store keeps them, and reads its index's entries and tables when first
    used. Templates are found through the tables by number (`_compiled`)."""

    def __init__(self, index: dict[str, Any], tables: Optional[Tables] = None,
                 words: Optional[Callable[[], Sequence[Sequence[str]]]] = None) -> None:
        if index.get("format") != MATCH_FORMAT:
            raise KBError(f"not a match index ({MATCH_FORMAT})")
        self.index = index
        entries: Sequence[dict[str, Any]] = index["entries"]
        t = tables if tables is not None else match_tables(entries)
        self._entries, self._t = entries, t
        self._made: dict[int, Compiled] = {}
        self.live: Mapping[str, dict[str, Any]] = LiveEntries(entries, t)
        self._words = words if words is not None else (lambda: folded_words(entries, t.usable))
        self._word_lists: Optional[Sequence[Sequence[str]]] = None

    def _compiled(self, n: int) -> Compiled:
        c = self._made.get(n)
        if c is None:
            c = self._made[n] = Compiled(self._entries, self._t, n)
        return c

    @property
    def release(self) -> Optional[str]:
        """The release the index is of; None for a tree that is none (a branch, a folder)."""
        release = self.index.get("release")
        return release if isinstance(release, str) else None

    @property
    def word_lists(self) -> Sequence[Sequence[str]]:
        """The distinct words of each template in lower case, by number (for `similar` and
        `probably` only)."""
        if self._word_lists is None:
            self._word_lists = self._words()
        return self._word_lists

    def candidates(self, text: str, fold: bool = False) -> list[Compiled]:
        """The templates whose rarest whole word the text holds (in lower case with `fold`, for a
        lower-cased text) and whose longest literal part it contains."""
        seen: dict[int, Compiled] = {}
        index = self._t.by_folded_word if fold else self._t.by_word
        for w in {m.group() for m in _WORD.finditer(text)} | {""}:
            for n in index.get(w, ()):
                seen[n] = self._compiled(n)
        return [c for c in seen.values() if (c.longest_folded if fold else c.longest) in text]

    def match(self, logged: str, clues: Clues = NO_CLUES) -> list[Match]:
        """Every template found in one normalised log message, most specific first (`clues`: the
        vLLM files and releases the paste names, preferred among equals). A paste that is all
        lower case (some tools and people lower-case what they copy) is compared without case."""
        found = self._match(logged, clues, self.candidates(logged), fold=False)
        if not found and logged.isascii() and logged == logged.lower() and logged != logged.upper():
            found = self._match(logged, clues, self.candidates(logged, fold=True), fold=True)
        return found

    def _match(self, logged: str, clues: Clues, candidates: list[Compiled], fold: bool) -> list[Match]:
        message = unwrap(logged, fold)
        out: list[Match] = []
        for c in candidates:
            parts = [p.lower() for p in c.entry["parts"]] if fold else c.entry["parts"]
            found = fit(parts, message, start=True, end=True)
            used = parts
            if found is None and parts[-1].endswith("."):  # pasted without its final period
                used = [*parts[:-1], parts[-1][:-1]]
                found = fit(used, message, start=True, end=True)
            if found is not None and not _clean_edges(used, found[0]):
                found = None  # a placeholder at an end took text around the message: not the whole message
            kind = "exact"
            if found is None and c.entry["literal"] >= MIN_LITERAL:
                found = contained(parts, logged)
                kind = "contained"
            if found is None:
                continue
            values = tuple((n, v.strip()) for n, v in zip(c.entry["names"], found[0]) if v.strip())
            out.append(Match(c.entry, kind, c.entry["literal"], values))
        return _rank(out, clues)

    def truncated(self, message: str, clues: Clues = NO_CLUES) -> list[Match]:
        """The message cut off at the end: it matches the start of a template (at least 24
        literal characters of it). A template that begins with a placeholder matches when the
        message begins with one value (a word or a bracketed value) and goes on with its text."""
        out = []
        # templates by the first _START characters of their first literal part, and those whose first
        # part is shorter (tried on every message)
        starts = [self._compiled(n) for n in (*self._t.by_start.get(message[:_START], ()), *self._t.short_start)]
        for c in starts + self._lead_candidates(message):
            parts = c.entry["parts"]
            first = parts[0]
            if first.startswith(message):  # cut inside the first literal part
                if len(message) >= 24:
                    out.append(Match(c.entry, "truncated", len(message)))
                continue
            if not message.startswith(first):
                continue
            for j in range(len(parts), 0, -1):  # the most literal parts that still match
                found = fit(parts[:j], message, start=True, end=j == len(parts))
                if found is not None:
                    groups = found[0] + ([message[found[1]:]] if j < len(parts) else [])
                    matched = sum(len(p) for p in parts[:j])
                    if j < len(parts):  # the last group is a value, then the start of the next literal part
                        at, cut = _cut_inside(groups[-1], parts[j])
                        groups[-1] = groups[-1][:at]
                        matched += cut
                    if not first and (not groups[0].strip() or _lead_value(groups[0]) != groups[0].strip()):
                        break  # the text before the first literal part is more than one value
                    if matched >= min(24, c.entry["literal"]):
                        values = tuple((n, v.strip()) for n, v in zip(c.entry["names"], groups) if v.strip())
                        out.append(Match(c.entry, "truncated", matched, values))
                    break
        return _rank(out, clues)[:5]

    def _lead_candidates(self, message: str) -> list[Compiled]:
        """The templates beginning with a placeholder whose next literal part starts after the
        value the message begins with (each once, in the order first met)."""
        seen: dict[int, Compiled] = {}
        for i in range(1, min(_lead_end(message), len(message) - _START, _MAX_LEAD) + 1):
            for n in self._t.by_lead.get(message[i:i + _START], ()):
                if n not in seen:
                    seen[n] = self._compiled(n)
        return list(seen.values())

    def similar(self, message: str, limit: int = 5, floor: float = MIN_SIMILARITY) -> list[Match]:
        """The current errors whose words are most like the message's (Jaccard, at least `floor`)."""
        words = _folded_words(message)
        if not words:
            return []
        scored = []
        tab = self._t
        # suggestions are errors of the release, not older wording
        for n, (template_words, literal, older) in enumerate(zip(self.word_lists, tab.literal, tab.older)):
            if template_words and literal >= MIN_LITERAL and not older:
                shared = len(words.intersection(template_words))  # the union, counted without building it
                overlap = shared / (len(words) + len(template_words) - shared)
                if overlap >= floor and overlap > 0:
                    scored.append((round(overlap, 3), n))
        scored.sort(key=lambda x: (-x[0], tab.ids[x[1]]))  # stable: as the matches would sort
        return [Match(self._compiled(n).entry, "similar", score) for score, n in scored[:limit]]

    def probably(self, message: str, clues: Clues = NO_CLUES) -> list[Match]:
        """Nothing matched: the templates of any release whose literal words align with the
        message with a few edits (FUZZY_EDITS of their weight at most). Kind `probably`; score:
        the template's weight less the edits; `differences` says what differs."""
        tokens = _tokens(message, FUZZY_MAX_TOKENS + 1)
        if not tokens or len(tokens) > FUZZY_MAX_TOKENS:
            return []
        words = _folded_words(message)
        if not words:
            return []
        shared = []
        tab = self._t
        for n, (template_words, weight) in enumerate(zip(self.word_lists, tab.literal)):
            if template_words and weight >= MIN_LITERAL:
                share = len(words.intersection(template_words)) / len(template_words)
                if share >= FUZZY_MIN_WORDS:
                    shared.append((share, n))
        shared.sort(key=lambda x: (-x[0], tab.older[x[1]], -tab.literal[x[1]], tab.ids[x[1]]))
        out = []
        for _, n in shared[:FUZZY_CANDIDATES]:
            c = self._compiled(n)
            template = _template_tokens(c.entry)
            if sum(1 for t in template if t is not None) < FUZZY_MIN_TOKENS:
                continue
            literal = sum(_weight(t) for t in template if t is not None)
            cost, steps = align(template, [t[0] for t in tokens])
            if cost > FUZZY_EDITS * literal:
                continue
            values = _aligned_values(c.entry["names"], template, steps, tokens, message)
            diff = tuple(differences(template, tokens, message, steps))
            out.append((cost, tuple(template), Match(c.entry, "probably", literal - cost, values, diff)))
        if not out:
            return []
        least = min(cost for cost, _, _ in out)
        if len({words for cost, words, _ in out if cost == least}) > 1:
            return []  # two templates of other words are as close: which one is a guess
        return _rank([x for _, _, x in out], clues)[:3]



def _folded_words(text: str) -> set[str]:
    """The distinct words of a text in lower case (a set as it goes: a long log is not listed first)."""
    return {m.group().lower() for m in _WORD.finditer(text)}


_KIND_ORDER = {"exact": 0, "contained": 1, "truncated": 2, "probably": 3, "similar": 4}


_MINOR = re.compile(r"v?(\d+)\.(\d+)")


def _minor(release: str) -> Optional[tuple[int, int]]:
    """(major, minor) of a release name; None for a name that is no version (a git ref)."""
    m = _MINOR.match(release)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _elsewhere(entry: dict[str, Any], clues: Clues) -> bool:
    """Whether the paste names releases and none of them raises this wording."""
    span = entry.get("releases")
    if not clues.minors or not span:
        return False
    first, last = _minor(span[0]), _minor(span[1])
    if first is None or last is None:
        return False
    return not any(first <= m <= last for m in clues.minors)


def _rank(matches: list[Match], clues: Clues = NO_CLUES) -> list[Match]:
    """Exact before contained before truncated; a template raised in a file that the paste's
    traceback names before others (the same message is often raised in several files, and the
    traceback tells which release's); wording of a release the paste names before other
    wording; for a whole message, the release's own wording before older wording; then the
    most literal text (inside a longer text or cut off, the most specific wins whatever its
    release); then the release's own; then the wording raised since the oldest release."""
    files = clues.files
    return sorted(matches, key=lambda m: (
        _KIND_ORDER[m.kind], m.entry["file"] not in files if files else False, _elsewhere(m.entry, clues),
        m.kind == "exact" and bool(m.entry.get("older")), -m.score, bool(m.entry.get("older")), _since(m.entry), m.id))


def _since(entry: dict[str, Any]) -> tuple[int, int, int]:
    """Among equals the wording raised by the most releases is the likelier, then the oldest:
    (minus the span in minor releases, the first release)."""
    span = entry.get("releases")
    first, last = (_minor(span[0]), _minor(span[1])) if span else (None, None)
    if first is None or last is None:
        return (0, 10**6, 0)
    return (-((last[0] - first[0]) * 1000 + last[1] - first[1]), first[0], first[1])


MAX_FOUND = 1_000  # distinct errors (an id with its values) listed; a long log's others are counted


def explain(text: str, matcher: Matcher, suggest: bool = True) -> Explanation:
    """The errors found in `text`; when none, the closest templates (not with `suggest` false)."""
    found: dict[tuple[str, tuple[tuple[str, str], ...]], Found] = {}
    order: list[tuple[str, tuple[tuple[str, str], ...]]] = []
    unlisted = 0  # messages of other errors, once MAX_FOUND are listed
    cuts: list[int] = []  # lines where a line or message longer than MAX_MESSAGE was cut
    clues = clues_of(text)
    for line, logged in iter_messages(text, cuts):
        matches = _inner_first(matcher.match(logged, clues), matcher, clues)
        if not matches:
            continue
        if matches[0].kind == "contained":  # a longer template cut off or aligned here explains more of it
            fuller = _fuller(matcher, unwrap(logged), clues)
            if fuller and (fuller[0].kind == "probably" or fuller[0].score > matches[0].score):
                matches = [fuller[0], *matches]
        best = matches[0]
        key = (best.id, best.values)
        if key in found:
            f = found[key]
            found[key] = Found(f.line, f.message, f.best, f.others, f.count + 1)
            continue
        if len(found) >= MAX_FOUND:
            unlisted += 1
            continue
        found[key] = Found(line, unwrap(logged), best, tuple(matches[1:]))
        order.append(key)
    if found:
        return Explanation(tuple(_answered(found[k], matcher, clues) for k in order), notes=_notes(cuts, unlisted),
                           release=matcher.release)
    # Nothing matched whole: messages cut off at the end (on any line; the longest may instead be
    # aligned whole, `probably`), else the closest templates to the longest message.
    # The messages are made again for each pass, never listed: a long log stays one copy of its text.
    longest, longest_message = -1, ""
    for i, (_, logged) in enumerate(iter_messages(text)):
        message = unwrap(logged)
        if longest < 0 or len(message) > len(longest_message):
            longest, longest_message = i, message
    for i, (line, logged) in enumerate(iter_messages(text)):
        message = unwrap(logged)
        cut = _fuller(matcher, message, clues) if i == longest else matcher.truncated(message, clues)
        if cut and (cut[0].id, cut[0].values) not in found:
            if len(found) >= MAX_FOUND:
                unlisted += 1
                continue
            found[(cut[0].id, cut[0].values)] = Found(line, message, cut[0], tuple(cut[1:]))
            order.append((cut[0].id, cut[0].values))
    if found:
        return Explanation(tuple(_answered(found[k], matcher, clues) for k in order), notes=_notes(cuts, unlisted),
                           release=matcher.release)
    return Explanation((), tuple(matcher.similar(longest_message)) if suggest else (), notes=_notes(cuts, unlisted),
                       release=matcher.release)


def _notes(cuts: list[int], unlisted: int) -> tuple[str, ...]:
    notes = []
    if cuts:
        notes.append(f"{len(cuts):,} line(s) or message(s) longer than {MAX_MESSAGE:,} characters were read up to "
                     f"that length (the first at line {min(cuts)})")
    if unlisted:
        notes.append(f"{unlisted:,} more message(s) of other errors are not listed: at most {MAX_FOUND:,} distinct "
                     "errors (an id with its values) are")
    return tuple(notes)


def _fuller(matcher: Matcher, message: str, clues: Clues) -> list[Match]:
    """The message cut off at the end, or, when a cut-off match explains less than half of it,
    the whole message aligned with a template (`probably`)."""
    cut = matcher.truncated(message, clues)
    if not cut or cut[0].score < len(message) / 2:  # a start matched, and most of the message differs
        cut = matcher.probably(message, clues) or cut
    return cut


def _inner_first(matches: list[Match], matcher: Matcher, clues: Clues) -> list[Match]:
    """An error that carries another one in a value ("Worker failed with error '{result}'"):
    the error inside, when a value is itself a whole vLLM message, comes first."""
    if not matches:
        return matches
    for _, value in matches[0].values:
        inner = matcher.match(value, clues)
        if inner and inner[0].kind == "exact":
            return [inner[0], matches[0], *[m for m in [*inner[1:], *matches[1:]] if m is not inner[0]]]
    return matches


LIVE_VIA = ("successor", "same", "declared")  # how an older wording's index entry leads to a live page
NEAREST_FLOOR = 0.01  # a removed error with no successor is still given the nearest live page, however far


def live_page(entry: dict[str, Any]) -> Optional[str]:
    """The id of the error the release raises whose page answers for this index entry, if any."""
    if not entry.get("older"):
        return str(entry["id"])
    if entry.get("page") and (entry.get("current") or entry.get("via") in LIVE_VIA):
        return str(entry["page"])
    return None


def _has_fix(entry: dict[str, Any]) -> bool:
    return bool(entry.get("solution"))


def _answered(f: Found, matcher: Matcher, clues: Clues = NO_CLUES) -> Found:
    """The first answer: the live page the best match leads to, or that of a match as specific
    (another site raising the message). A page with a fix comes before one without for the same
    message, unless the paste's traceback names the best match's file. A removed error with none is given the
    nearest current error by words (`closest`)."""
    best = f.best
    candidates = []
    for m in (best, *f.others):
        page = live_page(m.entry) if (m.kind, m.score) == (best.kind, best.score) else None
        if page is not None and page in matcher.live:
            candidates.append((m, matcher.live[page]))
    if candidates:
        m, entry = candidates[0]
        if not _has_fix(entry) and best.entry["file"] not in clues.files:
            m, entry = next((c for c in candidates if _has_fix(c[1]) and c[0].entry["parts"] == m.entry["parts"]),
                            candidates[0])
        if m is not best or entry["id"] != live_page(best.entry):
            via = "same"
        elif not best.entry.get("older"):
            via = "own"
        else:
            via = SUCCESSOR if best.entry.get("current") else str(best.entry.get("via") or "same")
        answer = Answer(entry, via)
        if best.entry.get("older") and not best.entry.get("current"):  # a removed error: the current one closest to it
            return replace(f, answer=answer, closest=Match(entry, "similar", _similarity(best.entry, entry)))
        return replace(f, answer=answer)
    e = best.entry
    if not e.get("older") or e.get("current"):
        return f
    near = matcher.similar(" ".join(e["parts"]), limit=1, floor=NEAREST_FLOOR)
    return replace(f, closest=near[0]) if near else f


def _similarity(a: dict[str, Any], b: dict[str, Any]) -> float:
    """The share of words two templates have in common (Jaccard), as `Matcher.similar` scores."""
    x = {w.lower() for w in _WORD.findall(" ".join(a["parts"]))}
    y = {w.lower() for w in _WORD.findall(" ".join(b["parts"]))}
    return round(len(x & y) / len(x | y), 3) if x | y else 0.0


MAX_INDEX_BYTES = 512 * 1024 * 1024  # the index of every published release is a few tens of MB
MATCH_INDEX = "api/match-index.json.gz"  # in a built site; gzipped (0.33.0: 5.3 MB -> 1.0 MB), the browser unpacks it


def load_index(path: Path) -> dict[str, Any]:
    """A match index file, checked field by field: a file of the wrong shape is a located
    error, never a KeyError in the matcher."""
    try:
        if path.exists() and not path.is_file():
            raise KBError("not a match index: not a regular file", str(path))
        index = json.loads(read_text(path, MAX_INDEX_BYTES))
    except FileNotFoundError:
        raise KBError("no match index there (build the site first, or leave out --site/--index)", str(path)) from None
    except RecursionError:
        raise KBError("not a readable match index: nested too deeply", str(path)) from None
    except (OSError, ValueError) as e:
        raise KBError(f"not a readable match index: {e}", str(path)) from None
    problem = index_problem(index)
    if problem is not None:
        raise KBError(f"not a match index: {problem}", str(path))
    assert isinstance(index, dict)
    return index



# --- measuring the matcher on a whole release -----------------------------------------------------
SAMPLES = ["7", "bfloat16", "Qwen/Qwen3-8B", "a b c", "3.5", "None"]


def fill(entry: dict[str, Any], rng: random.Random) -> str:
    parts: list[str] = entry["parts"]
    return parts[0] + "".join(rng.choice(SAMPLES) + p for p in parts[1:])


def round_trip(matcher: Matcher) -> dict[str, Any]:
    """Fill every template; it maps back when its own id is the best match, or shares the best
    rank with ids whose template is the same text (one message raised in several files). It is
    `ambiguous` when its own id is found but another template also fits the filled message and
    ranks first (a value with spaces can be read either way); `other` when its own id is not found."""
    own_entries = [e for e in matcher.index["entries"] if not e.get("older")]  # the release's own templates
    rng = random.Random(0)
    usable = [e for e in own_entries if e.get("matchable")]
    own = same_text = ambiguous = other = none = 0
    misses: list[str] = []
    for e in usable:
        ex = explain("ValueError: " + fill(e, rng), matcher)
        if not ex.found:
            none += 1
            misses.append(f"no match: {e['id']} {e['parts']}")
            continue
        f = ex.found[0]
        tied = [f.best] + [o for o in f.others if (o.kind, o.score) == (f.best.kind, f.best.score)]
        if f.best.id == e["id"]:
            own += 1
        elif any(m.id == e["id"] for m in tied) and all(m.entry["parts"] == e["parts"] for m in tied):
            same_text += 1
        elif any(m.id == e["id"] for m in f.others):
            ambiguous += 1
            misses.append(f"ambiguous {e['id']} -> {f.best.id}: {e['parts']} vs {f.best.entry['parts']}")
        else:
            other += 1
            misses.append(f"{e['id']} -> {f.best.id}: {e['parts']} vs {f.best.entry['parts']}")
    return {"templates": len(own_entries), "usable": len(usable), "own": own, "same_text": same_text,
            "ambiguous": ambiguous, "other": other, "none": none, "misses": misses}


__all__: Sequence[str] = ["Answer", "Explanation", "Found", "Match", "Matcher", "explain", "live_page", "log_messages",
                         "unwrap"]
