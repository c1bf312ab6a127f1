"""A pasted error message, traceback or whole log -> the vLLM errors it contains.

Matching runs over the compiled match index (the same one the site's search reads):
each template's literal parts with placeholders between them. A message is first unwrapped
from what users paste around it (log prefixes, ANSI colours, `ValueError: `, pydantic's
`ValidationError ... Value error, <message> [type=value_error ...]`), then matched:
exactly (the whole message), contained in a longer text, or cut off at the end. Candidates
are found through rare words of each template, so a 10 MB log takes seconds. When nothing
matches, the closest templates are offered with a similarity score, never as an answer.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

from kb.errors import KBError
from kb.explain.index import MATCH_FORMAT, index_problem, normalize

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
LOG_PREFIX = re.compile(r"^(?:\(\w+(?: pid=\d+)?\)\s+)?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+"
                        r"\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?\s+\[[^\]]*\]\s?")
PYDANTIC = re.compile(r"Value error, (.*?)(?: \[type=value_error\b.*)?$")
EXCEPTION = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception)(?:\[[^\]]*\])?: ")
# `SomeError: ` (or `RayTaskError(ValueError): `) anywhere after prose, a title tag such as
# `[Bug]: `, a quote or a code span: the message is what follows the last one.
EXCEPTION_MARK = re.compile(r"(?:^|(?<=[\s`'\"(\[:]))(?:[\w.]+\.)?\w*(?:Error|Exception)(?:\([\w.]*\))?"
                            r"(?:\[[^\]]*\])?: ")
EXCEPTION_MARK_FOLD = re.compile(EXCEPTION_MARK.pattern, re.IGNORECASE)  # in a lower-cased paste
_WRAPPING = "`*'\""
_STARTS = re.compile(r"^(?:Traceback \(most recent call last\):|\s*File \"|During handling|The above exception)")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{3,}")
MIN_SIMILARITY = 0.2  # below this a suggestion is noise
MIN_LITERAL = 8  # templates with less literal text ("TP {x}") only match a whole message, never inside a text


@dataclass(frozen=True)
class Match:
    entry: dict[str, Any]
    kind: str  # exact, contained, truncated, similar
    score: float  # literal characters matched (similarity for `similar`)
    values: tuple[tuple[str, str], ...] = ()

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
    closest: Optional[Match] = None  # for the wording of a removed error: the most similar current error


@dataclass(frozen=True)
class Explanation:
    found: tuple[Found, ...]
    suggestions: tuple[Match, ...] = ()  # when nothing matched: the closest templates


class _Compiled:
    """One template with the words the candidate search uses."""

    __slots__ = ("anchors", "entry", "longest", "words")

    def __init__(self, entry: dict[str, Any]) -> None:
        self.entry = entry
        self.longest = max(entry["parts"], key=len)
        self.words = set(_WORD.findall(" ".join(entry["parts"])))
        self.anchors = _anchor_words(entry["parts"])


@dataclass
class Matcher:
    """The index, ready to match: regexes compiled once, a rare word of each template indexed."""

    index: dict[str, Any]
    compiled: list[_Compiled] = field(default_factory=list)
    by_word: dict[str, list[_Compiled]] = field(default_factory=dict)
    word_sets: list[tuple[set[str], _Compiled]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.index.get("format") != MATCH_FORMAT:
            raise KBError(f"not a match index ({MATCH_FORMAT})")
        frequency: dict[str, int] = {}
        usable = [e for e in self.index["entries"] if e.get("matchable")]  # "{k}: {v}" matches anything: never
        for e in usable:
            c = _Compiled(e)
            self.compiled.append(c)
            for w in c.words:
                frequency[w] = frequency.get(w, 0) + 1
        for c in self.compiled:
            if c.anchors:
                rare = min(c.anchors, key=lambda w: (frequency[w], -len(w), w))
                self.by_word.setdefault(rare, []).append(c)
            else:
                self.by_word.setdefault("", []).append(c)  # no word: tried on every message
            self.word_sets.append(({w.lower() for w in c.words}, c))

    def candidates(self, text: str) -> list[_Compiled]:
        seen: dict[int, _Compiled] = {}
        for w in set(_WORD.findall(text)) | {""}:
            for c in self.by_word.get(w, ()):
                seen[id(c)] = c
        return [c for c in seen.values() if c.longest in text]

    def match(self, logged: str, files: frozenset[str] = frozenset()) -> list[Match]:
        """Every template found in one normalised log message, most specific first (`files`: the
        vLLM files a traceback in the paste names, preferred among equals). A paste that is all
        lower case (some tools and people lower-case what they copy) is compared without case."""
        found = self._match(logged, files, self.candidates(logged), fold=False)
        if not found and logged.isascii() and logged == logged.lower() and logged != logged.upper():
            found = self._match(logged, files, [c for c in self.compiled if c.longest.lower() in logged], fold=True)
        return found

    def _match(self, logged: str, files: frozenset[str], candidates: list[_Compiled], fold: bool) -> list[Match]:
        message = unwrap(logged, fold)
        out: list[Match] = []
        for c in candidates:
            parts = [p.lower() for p in c.entry["parts"]] if fold else c.entry["parts"]
            found = fit(parts, message, start=True, end=True)
            if found is None and parts[-1].endswith("."):  # pasted without its final period
                found = fit([*parts[:-1], parts[-1][:-1]], message, start=True, end=True)
            kind = "exact"
            if found is None and c.entry["literal"] >= MIN_LITERAL:
                found = fit(parts, logged, start=False, end=False)
                kind = "contained"
            if found is None:
                continue
            values = tuple(zip(c.entry["names"], (v.strip() for v in found[0])))
            out.append(Match(c.entry, kind, c.entry["literal"], values))
        return _rank(out, files)

    def truncated(self, message: str, files: frozenset[str] = frozenset()) -> list[Match]:
        """The message cut off at the end: it matches the start of a template (at least 24
        literal characters of it). Templates that begin with a placeholder are not tried."""
        out = []
        for c in self.compiled:
            parts = c.entry["parts"]
            first = parts[0]
            if not first or c.entry["literal"] < MIN_LITERAL:
                continue
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
                    if j < len(parts):  # the last group is a value and the start of the next literal part
                        cut = _overlap(groups[-1], parts[j])
                        groups[-1] = groups[-1][: len(groups[-1]) - cut]
                        matched += cut
                    if matched >= min(24, c.entry["literal"]):
                        values = tuple((n, v.strip()) for n, v in zip(c.entry["names"], groups) if v.strip())
                        out.append(Match(c.entry, "truncated", matched, values))
                    break
        return _rank(out, files)[:5]

    def similar(self, message: str, limit: int = 5) -> list[Match]:
        words = {w.lower() for w in _WORD.findall(message)}
        if not words:
            return []
        scored = []
        for template_words, c in self.word_sets:  # suggestions are errors of the release, not older wording
            if template_words and c.entry["literal"] >= MIN_LITERAL and not c.entry.get("older"):
                overlap = len(words & template_words) / len(words | template_words)
                if overlap >= MIN_SIMILARITY:
                    scored.append(Match(c.entry, "similar", round(overlap, 3)))
        return sorted(scored, key=lambda m: (-m.score, m.id))[:limit]


def _anchor_words(parts: list[str]) -> set[str]:
    """Words of the literal parts that stay whole words in any filled message: not the ones
    touching a placeholder (`uint8{dtype}` becomes `uint8bfloat16`)."""
    out: set[str] = set()
    for i, part in enumerate(parts):
        matches = list(_WORD.finditer(part))
        for m in matches:
            glued_left = i > 0 and m.start() == 0
            glued_right = i < len(parts) - 1 and m.end() == len(part)
            if not glued_left and not glued_right:
                out.add(m.group())
    return out


def _overlap(tail: str, literal: str) -> int:
    """How many characters at the end of `tail` begin `literal` (a message cut inside it)."""
    for k in range(min(len(tail) - 1, len(literal)), 0, -1):
        if tail.endswith(literal[:k]):
            return k
    return 0


def fit(parts: Sequence[str], text: str, start: bool, end: bool) -> Optional[tuple[list[str], int]]:
    """Where a template's literal `parts` occur in `text`, each two apart by a value of at least
    one character: the values, and where the last part ends. `start`/`end`: anchored at the
    text's start/end. Each part is taken at its leftmost place after the one before, which is
    what a regular expression with lazy groups finds, but in linear time: no backtracking."""
    first = parts[0]
    if start:
        if not text.startswith(first):
            return None
        pos = len(first)
    else:
        pos = text.find(first)
        if pos < 0:
            return None
        pos += len(first)
    middle = list(parts[1:])
    if not middle:
        return ([], pos) if not end or pos == len(text) else None
    limit = len(text)
    if end:
        if not text.endswith(middle[-1]):
            return None
        limit -= len(middle[-1])
        middle = middle[:-1]
    values: list[str] = []
    for p in middle:
        i = text.find(p, pos + 1, limit - 1 if end else limit)
        if i < 0:
            return None
        values.append(text[pos:i])
        pos = i + len(p)
    if end:
        if limit - pos < 1:
            return None
        values.append(text[pos:limit])
        pos = len(text)
    return values, pos


_KIND_ORDER = {"exact": 0, "contained": 1, "truncated": 2, "similar": 3}


def _rank(matches: list[Match], files: frozenset[str] = frozenset()) -> list[Match]:
    """Exact before contained before truncated; a template raised in a file that the paste's
    traceback names before others (the same message is often raised in several files, and the
    traceback tells which release's); the release's own wording before older wording; then the
    most literal text."""
    return sorted(matches, key=lambda m: (_KIND_ORDER[m.kind], m.entry["file"] not in files if files else False,
                                          bool(m.entry.get("older")), -m.score, m.id))


_TRACEBACK_FILE = re.compile(r'File "[^"\n]*?/(vllm/[^"\n]+\.py)"')


def traceback_files(text: str) -> frozenset[str]:
    """The files of vLLM's tree that a traceback in the text passes through."""
    return frozenset(_TRACEBACK_FILE.findall(text))


def unwrap(message: str, fold: bool = False) -> str:
    """The message inside what users paste around it."""
    m = PYDANTIC.search(message)
    if m:
        message = m.group(1)
    marks = list((EXCEPTION_MARK_FOLD if fold else EXCEPTION_MARK).finditer(message))
    if marks:
        message = message[marks[-1].end():]
    return _unbalanced_edges(message.strip())


def _unbalanced_edges(message: str) -> str:
    """Drop a code span's backtick, an emphasis star or a quote left at either end by what was
    cut around the message; one that pairs with another inside (`got 'x'`) is the message's own."""

    def lone(ch: str) -> bool:
        return ch in _WRAPPING and message.count(ch) % 2 == 1

    while message:
        if lone(message[0]):
            message = message[1:].strip()
        elif lone(message[-1]):
            message = message[:-1].strip()
        else:
            break
    return message


def log_messages(text: str) -> list[tuple[int, str]]:
    """Split a paste or a log into messages: a log line, a traceback line or an exception
    line starts a new one; other lines continue it (messages with newlines in their values)."""
    text = ANSI.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    out: list[tuple[int, list[str]]] = []
    fresh = True  # the next line starts a message (after a blank line, or at the start)
    for n, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            fresh = True
            continue
        line, had_prefix = LOG_PREFIX.subn("", raw, count=1)
        if fresh or had_prefix or _STARTS.match(raw) or EXCEPTION.match(line.strip()):
            out.append((n, [line]))
        else:
            out[-1][1].append(line)
        fresh = False
    return [(n, normalize(" ".join(lines)).strip()) for n, lines in out if "".join(lines).strip()]


def explain(text: str, matcher: Matcher) -> Explanation:
    found: dict[tuple[str, tuple[tuple[str, str], ...]], Found] = {}
    order: list[tuple[str, tuple[tuple[str, str], ...]]] = []
    files = traceback_files(text)
    for line, logged in log_messages(text):
        matches = _inner_first(matcher.match(logged, files), matcher, files)
        if not matches:
            continue
        best = matches[0]
        key = (best.id, best.values)
        if key in found:
            f = found[key]
            found[key] = Found(f.line, f.message, f.best, f.others, f.count + 1)
            continue
        found[key] = Found(line, unwrap(logged), best, tuple(matches[1:]))
        order.append(key)
    if found:
        return Explanation(tuple(_with_closest(found[k], matcher) for k in order))
    # Nothing matched whole: a message cut off at the end, else the closest templates.
    candidates = [unwrap(r) for _, r in log_messages(text)]
    message = max(candidates, key=len) if candidates else ""
    cut = matcher.truncated(message, files)
    if cut:
        return Explanation((_with_closest(Found(1, message, cut[0], tuple(cut[1:])), matcher),))
    return Explanation((), tuple(matcher.similar(message)))


def _inner_first(matches: list[Match], matcher: Matcher, files: frozenset[str]) -> list[Match]:
    """An error that carries another one in a value ("Worker failed with error '{result}'"):
    the error inside, when a value is itself a whole vLLM message, comes first."""
    if not matches:
        return matches
    for _, value in matches[0].values:
        inner = matcher.match(value, files)
        if inner and inner[0].kind == "exact":
            return [inner[0], matches[0], *[m for m in [*inner[1:], *matches[1:]] if m is not inner[0]]]
    return matches


def _with_closest(f: Found, matcher: Matcher) -> Found:
    """The wording of an error no release raises any more: name the closest current error."""
    e = f.best.entry
    if not e.get("older") or e.get("current"):
        return f
    near = matcher.similar(" ".join(e["parts"]), limit=1)
    return replace(f, closest=near[0]) if near else f


MAX_INDEX_BYTES = 512 * 1024 * 1024  # the index of every published release is a few tens of MB


def load_index(path: Path) -> dict[str, Any]:
    """A match index file, checked field by field: a file of the wrong shape is a located
    error, never a KeyError in the matcher."""
    try:
        if path.exists() and not path.is_file():
            raise KBError("not a match index: not a regular file", str(path))
        if path.is_file() and path.stat().st_size > MAX_INDEX_BYTES:
            raise KBError(f"not a match index: larger than {MAX_INDEX_BYTES // 2**20} MB", str(path))
        index = json.loads(path.read_text(encoding="utf-8"))
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


def explanation_json(ex: Explanation, site_url: Optional[str] = None) -> str:
    def match(m: Match) -> dict[str, Any]:
        e = m.entry
        page = _page(e)
        return {"id": e["id"], "class": e["cls"], "file": e["file"], "line": e["line"], "function": e["func"],
                "kind": m.kind, "score": m.score, "values": dict(m.values), "title": e["title"],
                "curated": e["curated"], "meaning": e.get("meaning"), "solution": e.get("solution"),
                "url": _url(page, site_url) if page else None, "releases": e.get("releases"),
                "olderWording": bool(e.get("older")), "currentId": e.get("current", e["id"]),
                "currentTemplate": e.get("currentTemplate"), "endedIn": e.get("endedIn")}

    def found(f: Found) -> dict[str, Any]:
        out = {"line": f.line, "message": f.message, "count": f.count, "match": match(f.best),
               "others": [match(o) for o in f.others]}
        if f.closest is not None:
            out["closestCurrent"] = match(f.closest)
        return out

    data = {"found": [found(f) for f in ex.found],
            "suggestions": [match(s) for s in ex.suggestions]}
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _page(entry: dict[str, Any]) -> Optional[str]:
    """The id whose page answers for this entry: its own, its successor's, or none."""
    return str(entry["page"]) if entry.get("page") else None if entry.get("older") else str(entry["id"])


def wording_note(entry: dict[str, Any]) -> Optional[str]:
    """What the lookup says of older wording: which releases raised it, what it reads now."""
    if not entry.get("older"):
        return None
    first, last = entry["releases"]
    span = first if first == last else f"{first}–{last}"
    if entry.get("current"):
        return (f"This is the wording of vLLM {span}; since {entry['endedIn']} it reads: "
                f"{entry['currentTemplate']} -> {entry['current']}")
    return f"Raised up to vLLM {last} (from {first}); removed in {entry['endedIn']}."


def _url(ident: str, site_url: Optional[str]) -> str:
    return f"{site_url.rstrip('/')}/errors/{ident}/" if site_url else f"/errors/{ident}/"


def explanation_text(ex: Explanation, site_url: Optional[str] = None) -> str:
    lines: list[str] = []
    if not ex.found:
        lines.append("No known vLLM error matches this text.")
        if ex.suggestions:
            lines += ["", "Closest templates (similarity of their words, not a match):"]
            for s in ex.suggestions:
                lines.append(f"  {s.score:.2f}  {s.id}  {s.entry['title']}  ({s.entry['file']}:{s.entry['line']})")
        return "\n".join(lines) + "\n"
    n = len(ex.found)
    lines.append(f"Found {n} vLLM error{'s' if n > 1 else ''}:")
    for f in ex.found:
        e, m = f.best.entry, f.best
        lines += ["", f"{e['id']}  {e['cls']}  {e['file']}:{e['line']}  ({e['func']})"]
        how = {"exact": "", "contained": " (found inside a longer text)", "truncated": " (the message is cut off; "
               "matched its start)"}[m.kind]
        seen = f", seen {f.count} times" if f.count > 1 else ""
        lines.append(f"  at line {f.line} of the input{seen}{how}: {e['title']}")
        note = wording_note(e)
        if note:
            lines.append(f"  {note}")
        if f.closest is not None:
            c = f.closest.entry
            lines.append(f"  The closest current error (similarity {f.closest.score:.2f}): {c['id']} {c['title']} "
                         f"({_url(c['id'], site_url)})")
        for name, value in m.values:
            lines.append(f"    {name} = {value}")
        if e.get("meaning"):
            lines.append(f"  What it means: {e['meaning']}")
        if e.get("solution"):
            lines.append(f"  First fix: {e['solution']}")
        page = _page(e)
        if page:
            lines.append(f"  {_url(page, site_url)}")
        same = [o for o in f.others if o.entry["parts"] == e["parts"]]
        rest = [o for o in f.others if o.entry["parts"] != e["parts"]]
        if same:
            lines.append("  The same message is raised at: " + ", ".join(
                f"{o.entry['file']}:{o.entry['line']} ({o.id})" for o in same))
        if rest:
            lines.append("  Less specific templates that match too: " + ", ".join(
                f"{o.id} ({o.entry['title'][:60]})" for o in rest[:5]))
    return "\n".join(lines) + "\n"


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



__all__: Sequence[str] = ["Explanation", "Found", "Match", "Matcher", "explain", "log_messages", "unwrap"]
