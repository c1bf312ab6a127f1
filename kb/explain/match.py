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
from kb.explain.index import MATCH_FORMAT, index_problem, literal_parts, matchable, normalize, unescaped
from kb.files import read_text

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
LOG_PREFIX = re.compile(r"^(?:\(\w+(?: pid=\d+)?\)\s+)?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+"
                        r"\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?\s+\[[^\]]*\]\s?")
PYDANTIC = re.compile(r"Value error, (.*?)(?: \[type=value_error\b.*)?$")
EXCEPTION = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception)(?:\[[^\]]*\])?: ")
# `SomeError: ` (or `RayTaskError(ValueError): `) anywhere after prose (in any script: `遇到了ValueError: `),
# a title tag such as `[Bug]: `, a quote or a code span: the message is what follows the last one.
EXCEPTION_MARK = re.compile(r"(?<![A-Za-z0-9_.])(?:[A-Za-z0-9_]+\.)*[A-Za-z0-9_]*(?:Error|Exception)"
                            r"(?:\([A-Za-z0-9_.]*\))?(?:\[[^\]]*\])?: ")
EXCEPTION_MARK_FOLD = re.compile(EXCEPTION_MARK.pattern, re.IGNORECASE)  # in a lower-cased paste
_WRAPPING = "`*'\""
_STARTS = re.compile(r"^(?:Traceback \(most recent call last\):|\s*File \"|During handling|The above exception)")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{3,}")
MIN_SIMILARITY = 0.2  # below this a suggestion is noise
MIN_LITERAL = 8  # templates with less literal text ("TP {x}") only match a whole message, never inside a text
_START = 8  # a cut-off message is compared with the templates that begin with its first 8 characters


@dataclass(frozen=True)
class Clues:
    """What a paste tells of where its error was raised: the vLLM files its traceback passes
    through, and the vLLM releases it names (`vllm==0.5.5`, `vLLM API server version 0.8.5`), as
    (major, minor): kb has one release per minor."""

    files: frozenset[str] = frozenset()
    minors: frozenset[tuple[int, int]] = frozenset()


NO_CLUES = Clues()


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
    closest: Optional[Match] = None  # for the wording of a removed error: the most similar current error


@dataclass(frozen=True)
class Explanation:
    found: tuple[Found, ...]
    suggestions: tuple[Match, ...] = ()  # when nothing matched: the closest templates


class _Compiled:
    """One template with the words the candidate search uses."""

    __slots__ = ("anchors", "entry", "longest", "longest_folded", "words")

    def __init__(self, entry: dict[str, Any]) -> None:
        self.entry = entry
        longest = max(entry["parts"], key=len)
        self.longest = longest[:-1] if longest.endswith(".") else longest  # a paste may lack the final period
        self.longest_folded = self.longest.lower()
        self.words = set(_WORD.findall(" ".join(entry["parts"])))
        self.anchors = _anchor_words(entry["parts"])


@dataclass
class Matcher:
    """The index, ready to match: regexes compiled once, a rare word of each template indexed."""

    index: dict[str, Any]
    compiled: list[_Compiled] = field(default_factory=list)
    by_word: dict[str, list[_Compiled]] = field(default_factory=dict)
    word_sets: list[tuple[set[str], _Compiled]] = field(default_factory=list)
    by_folded_word: dict[str, list[_Compiled]] = field(default_factory=dict)  # the same, in lower case
    # For cut-off messages: templates by the first _START characters of their first literal part,
    # and those whose first part is shorter (tried on every message).
    by_start: dict[str, list[_Compiled]] = field(default_factory=dict)
    short_start: list[_Compiled] = field(default_factory=list)
    # ... and those that begin with a placeholder, by the first _START characters of the literal
    # part after it (looked for anywhere in the message: the value before it is not known).
    by_lead: dict[str, list[_Compiled]] = field(default_factory=dict)

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
                self.by_folded_word.setdefault(rare.lower(), []).append(c)
            else:
                self.by_word.setdefault("", []).append(c)  # no word: tried on every message
                self.by_folded_word.setdefault("", []).append(c)
            self.word_sets.append(({w.lower() for w in c.words}, c))
            parts = c.entry["parts"]
            first = parts[0]
            if first and c.entry["literal"] >= MIN_LITERAL:
                if len(first) >= _START:
                    self.by_start.setdefault(first[:_START], []).append(c)
                else:
                    self.short_start.append(c)
            elif len(parts) > 1 and len(parts[1]) >= _START and c.entry["literal"] >= MIN_LITERAL:
                self.by_lead.setdefault(parts[1][:_START], []).append(c)

    def candidates(self, text: str, fold: bool = False) -> list[_Compiled]:
        """The templates whose rarest whole word the text holds (in lower case with `fold`, for a
        lower-cased text) and whose longest literal part it contains."""
        seen: dict[int, _Compiled] = {}
        index = self.by_folded_word if fold else self.by_word
        for w in set(_WORD.findall(text)) | {""}:
            for c in index.get(w, ()):
                seen[id(c)] = c
        return [c for c in seen.values() if (c.longest_folded if fold else c.longest) in text]

    def match(self, logged: str, clues: Clues = NO_CLUES) -> list[Match]:
        """Every template found in one normalised log message, most specific first (`clues`: the
        vLLM files and releases the paste names, preferred among equals). A paste that is all
        lower case (some tools and people lower-case what they copy) is compared without case."""
        found = self._match(logged, clues, self.candidates(logged), fold=False)
        if not found and logged.isascii() and logged == logged.lower() and logged != logged.upper():
            found = self._match(logged, clues, self.candidates(logged, fold=True), fold=True)
        return found

    def _match(self, logged: str, clues: Clues, candidates: list[_Compiled], fold: bool) -> list[Match]:
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
        for c in self.by_start.get(message[:_START], []) + self.short_start + self._lead_candidates(message):
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

    def _lead_candidates(self, message: str) -> list[_Compiled]:
        """The templates beginning with a placeholder whose next literal part starts after the
        value the message begins with (each once, in the order first met)."""
        seen: dict[int, _Compiled] = {}
        for i in range(1, min(_lead_end(message), len(message) - _START, _MAX_LEAD) + 1):
            for c in self.by_lead.get(message[i:i + _START], ()):
                seen.setdefault(id(c), c)
        return list(seen.values())

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

    def probably(self, message: str, clues: Clues = NO_CLUES) -> list[Match]:
        """Nothing matched: the templates of any release whose literal words align with the
        message with a few edits (FUZZY_EDITS of their weight at most). Kind `probably`; score:
        the template's weight less the edits; `differences` says what differs."""
        tokens = _tokens(message)
        if not tokens or len(tokens) > FUZZY_MAX_TOKENS:
            return []
        words = {w.lower() for w in _WORD.findall(message)}
        if not words:
            return []
        shared = []
        for template_words, c in self.word_sets:
            if template_words and c.entry["literal"] >= MIN_LITERAL:
                share = len(words & template_words) / len(template_words)
                if share >= FUZZY_MIN_WORDS:
                    shared.append((share, c))
        shared.sort(key=lambda t: (-t[0], bool(t[1].entry.get("older")), -t[1].entry["literal"], t[1].entry["id"]))
        out = []
        for _, c in shared[:FUZZY_CANDIDATES]:
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


# --- edited wording: an alignment of words with a few edits ------------------------------------------
_TOKEN = re.compile(r"[A-Za-z0-9_]+|[^\sA-Za-z0-9_]")
FUZZY_MAX_TOKENS = 160  # longer messages are not aligned (an edited message is a sentence or two)
FUZZY_CANDIDATES = 6  # templates aligned, those sharing most words with the message
FUZZY_MIN_WORDS = 0.5  # the share of words a template must share with the message to be aligned
FUZZY_MIN_TOKENS = 6  # literal words and signs a template needs to be told apart by alignment
FUZZY_EDITS = 0.0  # the share of the template's weight that may differ: bench/fuzzy.py shows that any
# edit (a word, a sign) already names a sibling error for some unknown messages, so the lookup
# says "probably" only for the same words and signs, spaced, cased or wrapped differently
WORD_COST, SIGN_COST = 4, 1  # a word changed, added or left out weighs four signs (a bracket, a period)


_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _weight(token: str) -> int:
    """What an edit of this token costs: a word four, a sign (a bracket, a period) one."""
    return WORD_COST if token[0] in _WORD_CHARS else SIGN_COST


def _tokens(text: str) -> list[tuple[str, int, int]]:
    return [(m.group().lower(), m.start(), m.end()) for m in _TOKEN.finditer(text)]


def _template_tokens(entry: dict[str, Any]) -> list[Optional[str]]:
    """The template as words and signs in lower case, None for each placeholder."""
    out: list[Optional[str]] = []
    for i, part in enumerate(entry["parts"]):
        out += [t.lower() for t in _TOKEN.findall(part)]
        if i < len(entry["names"]):
            out.append(None)
    return out


def align(template: Sequence[Optional[str]], message: Sequence[str]) -> tuple[int, list[tuple[str, int, int]]]:
    """The fewest edits (a word changed, added or left out) that turn a stretch of `message`
    into `template`, whose None tokens (placeholders) take one or more message tokens for free
    (a word replaced by an unrelated one costs as much as one left out and one added);
    and the steps, in order: ("=", i, j) a word kept (twice for a word split in two by a wrap),
    ("~", i, j) changed, ("+", i, -1) a message word added, ("-", -1, j) a template word left
    out, ("v", i, j) a value. Dynamic programming
    over len(template) x len(message) cells; the whole message is aligned."""
    n, m = len(message), len(template)
    weight = [WORD_COST if t is None else _weight(t) for t in template]
    added = [_weight(w) for w in message]
    cost = [[0] * (m + 1) for _ in range(n + 1)]
    step = [[""] * (m + 1) for _ in range(n + 1)]
    for j in range(1, m + 1):
        cost[0][j] = cost[0][j - 1] + weight[j - 1]
        step[0][j] = "-"
    for i in range(1, n + 1):
        word = message[i - 1]
        row, up = cost[i], cost[i - 1]
        srow = step[i]
        row[0] = up[0] + added[i - 1]  # the whole message is aligned: no text before or after it
        srow[0] = "+"
        for j in range(1, m + 1):
            t = template[j - 1]
            if t is None:  # a value: this token, and perhaps the ones before it
                best, how = up[j - 1], "v"
                if up[j] < best and step[i - 1][j] in ("v", "w"):
                    best, how = up[j], "w"
            else:
                if word == t:
                    best, how = up[j - 1], "="
                elif i > 1 and message[i - 2] + word == t:  # a word split by a wrap: "tok" "ens"
                    best, how = cost[i - 2][j - 1], "2"
                elif _close(word, t):  # a typo or a changed ending: one edit
                    best, how = up[j - 1] + max(weight[j - 1], added[i - 1]), "~"
                else:  # another word: as much as leaving one out and adding the other
                    best, how = up[j - 1] + weight[j - 1] + added[i - 1], "~"
                if up[j] + added[i - 1] < best:
                    best, how = up[j] + added[i - 1], "+"
            if row[j - 1] + weight[j - 1] < best:
                best, how = row[j - 1] + weight[j - 1], "-"
            row[j] = best
            srow[j] = how
    end = n
    steps: list[tuple[str, int, int]] = []
    i, j = end, m
    while j > 0 or i > 0:
        how = step[i][j]
        if how in ("=", "~", "v"):
            steps.append(("v" if how == "v" else how, i - 1, j - 1))
            i, j = i - 1, j - 1
        elif how == "2":
            steps += [("=", i - 1, j - 1), ("=", i - 2, j - 1)]
            i, j = i - 2, j - 1
        elif how == "w":
            steps.append(("v", i - 1, j - 1))
            i -= 1
        elif how == "+":
            steps.append(("+", i - 1, -1))
            i -= 1
        else:
            steps.append(("-", -1, j - 1))
            j -= 1
    steps.reverse()
    return cost[end][m], steps


def _close(a: str, b: str) -> bool:
    """Two spellings of one word: at most a third of the longer one edited (Levenshtein)."""
    if abs(len(a) - len(b)) * 3 > max(len(a), len(b)):
        return False
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1] * 3 <= max(len(a), len(b))


def differences(template: Sequence[Optional[str]], message: Sequence[tuple[str, int, int]], text: str,
                steps: Sequence[tuple[str, int, int]]) -> list[str]:
    """What differs, in words: `"a" instead of "b"`, `added "c"`, `without "d"` (runs of one kind joined)."""
    out: list[str] = []
    run: list[tuple[str, int, int]] = []

    def flush() -> None:
        if not run:
            return
        kind = run[0][0]
        said = text[message[run[0][1]][1]: message[run[-1][1]][2]] if kind in "~+" else ""
        wanted = " ".join(str(template[s[2]]) for s in run) if kind in "~-" else ""
        out.append(f'"{said}" instead of "{wanted}"' if kind == "~" else f'added "{said}"' if kind == "+"
                   else f'without "{wanted}"')
        run.clear()

    for s in steps:
        if s[0] in "~+-" and (not run or run[0][0] == s[0]):
            run.append(s)
            continue
        flush()
        if s[0] in "~+-":
            run.append(s)
    flush()
    return out


def _aligned_values(names: Sequence[str], template: Sequence[Optional[str]], steps: Sequence[tuple[str, int, int]],
                    tokens: Sequence[tuple[str, int, int]], text: str) -> tuple[tuple[str, str], ...]:
    """The message text each placeholder took in an alignment (the k-th None of the template is
    the k-th name)."""
    spans: dict[int, tuple[int, int]] = {}
    for kind, i, j in steps:
        if kind == "v":
            a, b = spans.get(j, (tokens[i][1], tokens[i][2]))
            spans[j] = (min(a, tokens[i][1]), max(b, tokens[i][2]))
    holes = [j for j, t in enumerate(template) if t is None]
    return tuple((name, text[spans[j][0]:spans[j][1]]) for name, j in zip(names, holes) if j in spans)


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


def _cut_inside(tail: str, literal: str) -> tuple[int, int]:
    """A message cut inside `literal`, perhaps followed by other text: where in `tail` (after a
    value of at least one character) the longest start of `literal` begins, and its length;
    (len(tail), 0) when none does. Found by bisection: a start that occurs has shorter starts
    that occur too."""
    low, high = 0, len(literal)  # literal[:low] occurs; literal[:high + 1] does not
    while low < high:
        mid = (low + high + 1) // 2
        if tail.find(literal[:mid], 1) >= 0:
            low = mid
        else:
            high = mid - 1
    return (tail.find(literal[:low], 1), low) if low else (len(tail), 0)


_OPEN = {"[": "]", "(": ")", "{": "}", "'": "'", '"': '"'}
_CLOSE = {v: k for k, v in _OPEN.items()}
_EDGE = "`*'\".,;:()[]{} "


def _bracketed(text: str, opener: str, closer: str) -> int:
    """The end of the bracketed value at the start of `text` (its closer counted with nesting),
    or -1 when it does not close."""
    depth = 0
    for i, ch in enumerate(text):
        if ch == closer and (depth > 0 or opener == closer) and i > 0:
            depth -= 1
            if depth <= 0:
                return i + 1
        elif ch == opener:
            depth += 1
    return -1


def _lead_value(before: str) -> str:
    """The value of a placeholder that starts a template found inside a longer text: the word
    (or bracketed value) just before the literal text, not the log text before it."""
    if before[-1:] in _CLOSE:
        end = _bracketed(before[::-1], before[-1], _CLOSE[before[-1]])
        if end > 0:
            return before[len(before) - end:]
    word = before.rsplit(None, 1)[-1] if before.strip() else ""
    return word.strip(_EDGE)


_SPACE = " \t\n\r\f\v"
_MAX_LEAD = 4096  # characters of a value a cut-off message may begin with (a long list; not a whole log line)


def _lead_end(message: str) -> int:
    """How far the value a message begins with reaches, with the spaces after it: a bracketed
    or quoted value, else a run of other characters than spaces (one value, as `_lead_value`
    takes it; the literal text after it begins there at the latest)."""
    end = 0
    if message[:1] in _OPEN:
        end = max(0, _bracketed(message, message[0], _OPEN[message[0]]))
    while end < len(message) and message[end] not in _SPACE:
        end += 1
    while end < len(message) and message[end] in _SPACE:
        end += 1
    return end


def _trail_value(after: str) -> str:
    """The value of a placeholder that ends a template found inside a longer text: a bracketed
    or quoted value, else the word after the literal text, not the text that follows."""
    after = after.lstrip()
    if after[:1] in _OPEN:
        end = _bracketed(after, after[0], _OPEN[after[0]])
        if end > 0:
            return after[:end]
    word = after.split(None, 1)[0] if after.strip() else ""
    return word.strip(_EDGE)


def _balanced(value: str) -> bool:
    return all(value.count(o) == value.count(c) for o, c in ("[]", "()", "{}")) and value.count("'") % 2 == 0 \
        and value.count('"') % 2 == 0


def _clean_edges(parts: Sequence[str], values: Sequence[str]) -> bool:
    """Whether the values of placeholders at the ends of a whole-message match hold only a
    value: the word or bracketed value before the first literal part, and a balanced value
    after the last one (no log text, wrapper or half a JSON object around the message)."""
    if not values:
        return True
    if parts[0] == "" and _lead_value(values[0]) != values[0].strip():
        return False
    return parts[-1] != "" or _balanced(values[-1])


def contained(parts: Sequence[str], text: str) -> Optional[tuple[list[str], int]]:
    """A template inside a longer text (its final period may be missing). A placeholder at
    either end takes only the word or bracketed value next to the literal text."""
    tries = [list(parts)]
    if parts[-1].endswith("."):
        tries.append([*parts[:-1], parts[-1][:-1]])
    for p in tries:
        lead, trail = p[0] == "", p[-1] == ""
        core = p[1 if lead else 0: len(p) - 1 if trail else len(p)]
        if trail and core:  # "... of {n}. {suggestion}" raised with an empty suggestion ends at "."
            core = [*core[:-1], core[-1].rstrip()]
        if not core or not core[0]:
            continue
        found = fit(core, text, start=False, end=False)
        if found is None:
            continue
        values, pos = found
        if lead:
            first = _lead_value(text[: text.find(core[0])])
            if not first:
                continue
            values = [first, *values]
        if trail:  # the value after the literal text; empty when the text ends there
            last = _trail_value(text[pos:])
            if not last and text[pos:].strip():
                continue
            values = [*values, last]
        return values, pos
    return None


MIN_QUOTED = 12  # literal characters a cut-off quote must keep, and at least half the template's


def quotable(template: str) -> bool:
    """Whether a quote can be told to be this template's message: it has words of its own, at
    least MIN_LITERAL characters (`Bad {x}` is the start of too many lines)."""
    parts, _ = literal_parts(template)
    return matchable(parts) and sum(len(p.strip()) for p in parts) >= MIN_LITERAL


def quotes_template(template: str, quote: str) -> bool:
    """Whether `quote` (a line a public report quotes, maybe after `ValueError: `, maybe cut off
    after one of the template's values) is this template's message. Linear time (`fit`)."""
    if not quotable(template):
        return False
    parts, _ = literal_parts(template)
    text = normalize(quote.strip())
    texts = [text, EXCEPTION.sub("", text, count=1)]
    literal = sum(len(p) for p in parts)
    tries = [parts]
    for k in range(len(parts) - 1, 0, -1):  # cut off after the value that follows parts[k - 1]
        kept = sum(len(p) for p in parts[:k])
        if kept < max(MIN_QUOTED, literal / 2):
            break
        tries.append([*parts[:k], ""])
    return any(contained(p, t) is not None for p in tries for t in texts)


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


_TRACEBACK_FILE = re.compile(r'File "[^"\n]*?/(vllm/[^"\n]+\.py)"')


# "vllm==0.5.5", "vllm 0.4.0.post1", "vLLM Version: 0.6.3", "vllm/vllm-openai:v0.8.5", "vLLM API server
# version 0.8.5": the word vllm, up to 30 characters without a digit on the same line, a version
_RELEASE = re.compile(r"\bvllm\b[^\n\d]{0,30}?\bv?(\d+)\.(\d+)\.\d+", re.IGNORECASE | re.ASCII)


def clues_of(text: str) -> Clues:
    """The vLLM files a traceback in the text passes through and the releases it names."""
    text = unescaped(text)
    return Clues(frozenset(_TRACEBACK_FILE.findall(text)),
                 frozenset((int(a), int(b)) for a, b in _RELEASE.findall(text)))


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
    text = ANSI.sub("", unescaped(text.replace("\r\n", "\n").replace("\r", "\n")))
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
    clues = clues_of(text)
    for line, logged in log_messages(text):
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
        found[key] = Found(line, unwrap(logged), best, tuple(matches[1:]))
        order.append(key)
    if found:
        return Explanation(tuple(_with_closest(found[k], matcher) for k in order))
    # Nothing matched whole: messages cut off at the end (on any line; the longest may instead be
    # aligned whole, `probably`), else the closest templates to the longest message.
    messages = [(line, unwrap(r)) for line, r in log_messages(text)]
    longest = max(range(len(messages)), key=lambda i: len(messages[i][1])) if messages else -1
    for i, (line, message) in enumerate(messages):
        cut = _fuller(matcher, message, clues) if i == longest else matcher.truncated(message, clues)
        if cut and (cut[0].id, cut[0].values) not in found:
            found[(cut[0].id, cut[0].values)] = Found(line, message, cut[0], tuple(cut[1:]))
            order.append((cut[0].id, cut[0].values))
    if found:
        return Explanation(tuple(_with_closest(found[k], matcher) for k in order))
    return Explanation((), tuple(matcher.similar(messages[longest][1] if messages else "")))


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


def _with_closest(f: Found, matcher: Matcher) -> Found:
    """The wording of an error no release raises any more: name the closest current error."""
    e = f.best.entry
    if not e.get("older") or e.get("current"):
        return f
    near = matcher.similar(" ".join(e["parts"]), limit=1)
    return replace(f, closest=near[0]) if near else f


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


def explanation_json(ex: Explanation, site_url: Optional[str] = None) -> str:
    def match(m: Match) -> dict[str, Any]:
        e = m.entry
        page = _page(e)
        return {"id": e["id"], "class": e["cls"], "file": e["file"], "line": e["line"], "function": e["func"],
                "kind": m.kind, "score": m.score, "values": dict(m.values), "title": e["title"],
                "curated": e["curated"], "meaning": e.get("meaning"), "solution": e.get("solution"),
                "url": page_url(page, site_url) if page else None, "releases": e.get("releases"),
                "olderWording": bool(e.get("older")), "currentId": e.get("current", e["id"]),
                "currentTemplate": e.get("currentTemplate"), "endedIn": e.get("endedIn"),
                "differences": list(m.differences)}

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


def page_url(ident: str, site_url: Optional[str]) -> str:
    """An error page's URL: under `site_url`, else the site's own path."""
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
               "matched its start)", "probably": " (probably: the wording differs, " + "; ".join(m.differences) + ")"
               }[m.kind]
        seen = f", seen {f.count} times" if f.count > 1 else ""
        lines.append(f"  at line {f.line} of the input{seen}{how}: {e['title']}")
        note = wording_note(e)
        if note:
            lines.append(f"  {note}")
        if f.closest is not None:
            c = f.closest.entry
            lines.append(f"  The closest current error (similarity {f.closest.score:.2f}): {c['id']} {c['title']} "
                         f"({page_url(c['id'], site_url)})")
        for name, value in m.values:
            lines.append(f"    {name} = {value}")
        if e.get("meaning"):
            lines.append(f"  What it means: {e['meaning']}")
        if e.get("solution"):
            lines.append(f"  First fix: {e['solution']}")
        page = _page(e)
        if page:
            lines.append(f"  {page_url(page, site_url)}")
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
