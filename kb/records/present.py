"""Facts about an error written out for people: title, slug, subsystem, trigger, related.

Everything here is derived from the scan alone, never invented: an uncurated page is built
only from these.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional
from urllib.parse import quote

from kb.entries.sentences import first_sentence_end
from kb.model import Excerpt, RaiseSite
from kb.scan.ids import is_id
from kb.scan.messages import sub_placeholders, template_parts

TITLE_MAX = 100
_WORD = re.compile(r"[a-z0-9]+")


# The lines of a raise's excerpt that pages and API records show. A curated error shows all the
# scan keeps (37: the sibling checks before it, the code after). An uncurated one, of which a
# release has thousands, shows the statement that opens its block (the `if` of its guard, the
# `def` of an unconditional raise) down to the raise's last line, at most SHOWN_BEFORE lines above
# it; the rest is one click away (the pinned GitHub link). Excerpts were a third of the site.
SHOWN_BEFORE = 8
_OPENER = re.compile(r"(?:if|elif|else|for|while|with|try|except|finally|def|async|case|match|assert)\b")
_BRANCH = re.compile(r"(?:elif|else|except|finally|case)\b")  # continues a statement opened above it
_DEF = re.compile(r"(?:async\s+)?def\b")


def shown_lines(site: RaiseSite, curated: bool) -> tuple[int, int]:
    """The first and last line of `site`'s excerpt shown in full."""
    e = site.excerpt
    if curated:
        return e.start, e.end
    return block_start(e, site.line), min(e.end, max(site.line, site.fact.end_line))


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


def block_start(e: Excerpt, line: int) -> int:
    """The line of the outermost statement, at most SHOWN_BEFORE lines above `line`, that opens a
    block `line` is in (an `if`, `with`, ... up to the function's `def`): the guard with what
    encloses it and the local definitions between them. An `else:` or `except` brings the `if`
    or `try` it belongs to, and a condition written on several lines its first line, as far up as
    the excerpt goes. With no opener that near, the raise's own line."""
    if not e.start <= line <= e.end:
        return line
    limit = max(e.start, line - SHOWN_BEFORE)
    indent = _indent(e.lines[line - e.start])
    found, pending = None, False  # pending: inside a statement whose first line is further up
    for n in range(line - 1, e.start - 1, -1):
        if n < limit and not pending:
            break
        text = e.lines[n - e.start]
        body = text.strip()
        if not body or body.startswith("#") or _indent(text) >= indent:
            continue
        if not _OPENER.match(body):
            indent, pending = _indent(text) + 1, True  # `):` of a condition on several lines
            continue
        found, indent, pending = n, _indent(text), False
        if _BRANCH.match(body):
            indent, pending = indent + 1, True  # its `if`, `try` or `match` is at the same indent
        elif _DEF.match(body):
            break
    return found if found is not None else line


def without_text(template: str) -> bool:
    """Whether a template has no text of its own (`{e}`, `{' '.join(errors)}`): its words are
    built at run time."""
    return not sub_placeholders(" ".join(template.split()), "").strip(" .:,;()[]'\"`")


def title_of(template: str, exception_class: str, function: str) -> str:
    """The message's first sentence, cut at a word boundary; a fact-based title when empty."""
    text = " ".join(template.split())
    if without_text(text):
        return f"{exception_class} raised in {function}"
    end = first_sentence_end(text)  # kb/entries/sentences.py: the rule of every cut at a sentence
    first = text[:end] if end >= 0 else text
    if len(first) <= TITLE_MAX:
        return first
    cut = first[: TITLE_MAX - 1]
    if " " in cut[TITLE_MAX // 2 :]:
        cut = cut[: cut.rfind(" ")]
    return cut.rstrip(" ,;:-(") + "…"


def title_key(title: str) -> tuple[str, str]:
    """How titles sort in a list "by title": by their first word, whatever quotes, dashes or
    placeholder braces come before it (`` `--max-model-len` `` with the m's), case aside."""
    return re.sub(r"^[\W_]+", "", title).casefold(), title


# A slug is a folder name (errors/<slug>/) and a file name (kb new's <slug>.yaml): words and the
# whole are capped well below a file system's 255 bytes, suffixes included (vLLM's longest is 95).
SLUG_WORD_MAX = 64
# Slugs are published URLs: they keep the rule they were first made with, which takes the
# innermost braces for a placeholder (`{f' since {reason}' if reason else ''}` leaves words in).
_SLUG_PLACEHOLDER = re.compile(r"\{[^{}]*\}")
SLUG_MAX = 120


def slug_base(template: str, site: RaiseSite) -> str:
    words = _WORD.findall(_SLUG_PLACEHOLDER.sub(" ", template).lower())[:10]
    if not words:
        words = _WORD.findall(f"{site.exception_class} {site.fact.qualname}".lower().replace("_", " "))[:10]
    slug = _capped("-".join(w[:SLUG_WORD_MAX] for w in words)) or "error"
    return slug + "-error" if is_id(slug) else slug


def _capped(slug: str, limit: int = SLUG_MAX) -> str:
    """At most `limit` characters, cut after a whole word when one fits."""
    if len(slug) <= limit:
        return slug
    cut = slug[: limit + 1]
    return cut[: cut.rfind("-")] if "-" in cut else slug[:limit]


def unique_slugs(items: list[tuple[str, str, str]]) -> dict[str, str]:
    """(id, base slug, file) -> slug unique in the site, the same for the same inputs.

    A base shared by several ids gets the file's stem, then the id's first 6 characters."""
    by_base: dict[str, list[tuple[str, str]]] = {}
    for ident, base, file in items:
        by_base.setdefault(base, []).append((ident, file))
    out: dict[str, str] = {}
    for base, group in by_base.items():
        if len(group) == 1:
            out[group[0][0]] = base
            continue
        stems: dict[str, int] = {}
        for _, file in group:
            stem = _stem(file)
            stems[stem] = stems.get(stem, 0) + 1
        for ident, file in group:
            stem = _stem(file)
            out[ident] = f"{base}-{stem}" if stems[stem] == 1 else f"{base}-{stem}-{ident[:6]}"
    uses = Counter(out.values())
    for ident, slug in sorted(out.items()):
        if uses[slug] > 1:  # a suffix met another base
            out[ident] = f"{slug}-{ident[:6]}"
    return out


def _stem(file: str) -> str:
    parts = file.removesuffix(".py").split("/")
    name = parts[-2] if parts[-1] == "__init__" and len(parts) > 1 else parts[-1]
    return _capped("-".join(w[:SLUG_WORD_MAX] for w in _WORD.findall(name.lower())), SLUG_WORD_MAX) or "module"


def subsystem_of(file: str) -> str:
    """The top folder under vllm/ (config, v1, entrypoints, ...); `vllm` for top-level modules."""
    parts = file.split("/")
    return parts[1] if len(parts) > 2 else "vllm"


def guard_names(site: RaiseSite) -> set[str]:
    """Names the guard reads (not `self`), used to relate errors that test the same things."""
    names: set[str] = set()
    for term in site.fact.guard_terms:
        names |= _term_names(term)
    return names


@lru_cache(maxsize=65536)
def _term_names(term: str) -> frozenset[str]:
    try:
        tree = ast.parse(term, mode="eval")
    except SyntaxError:
        return frozenset()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and node.id not in ("self", "cls", "None", "True", "False"):
            names.add(node.id)
    return frozenset(names)


@dataclass(frozen=True)
class Trigger:
    """The trigger written out from the guard: the innermost condition, what encloses it, the
    local definitions it reads, and non-`if` contexts."""

    condition: str
    inside: str
    locals: tuple[tuple[str, str], ...]
    contexts: tuple[str, ...]
    function: str


def trigger_of(site: RaiseSite) -> Trigger:
    terms = list(site.fact.guard_terms)
    return Trigger(terms[-1] if terms else "", " and ".join(terms[:-1]),
                   tuple((d.name, d.source) for d in site.fact.locals), tuple(c.source for c in site.fact.contexts),
                   site.fact.qualname)


_LINE_BREAK = re.compile(r"[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]+")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x1f\x7f]")


def one_line(text: str) -> str:
    """Line breaks as spaces (a break inside a Markdown span would end it, or the paragraph),
    other control characters as U+FFFD (HTML has no place for them)."""
    return _CONTROL.sub("\ufffd", _LINE_BREAK.sub(" ", text))


def code_span(text: str) -> str:
    """`text` as one inline Markdown code span, on one line, whatever backticks it holds."""
    text = one_line(text)
    ticks = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def trigger_text(site: RaiseSite, markdown: bool = False) -> str:
    """The trigger in plain sentences, built only from the source (`markdown` quotes code)."""
    def q(code: str) -> str:
        return code_span(code) if markdown else code

    t = trigger_of(site)
    if t.condition:
        text = f"Raised in {q(t.function)} when {q(t.condition)}"
        if t.inside:
            text += f", inside: {q(t.inside)}"
    else:
        text = f"Raised whenever {q(t.function)} reaches this line (no enclosing condition in the function)"
    if t.contexts:
        text += "; within " + ", ".join(code_span(c) if markdown else f"`{c}`" for c in t.contexts)
    text += "."
    if t.locals:
        text += " Where " + "; ".join(q(f"{n} = {s}") for n, s in t.locals) + "."
    return text


def related_ids(sites_by_id: dict[str, list[RaiseSite]], limit: int = 10) -> dict[str, tuple[str, ...]]:
    """Related errors: same function first, then same file, then shared guard variables."""
    by_function: dict[tuple[str, str], list[str]] = {}
    by_file: dict[str, list[str]] = {}
    by_name: dict[str, list[str]] = {}
    names_of: dict[str, set[str]] = {}
    for ident in sorted(sites_by_id):
        sites = sites_by_id[ident]
        file = sites[0].file
        by_file.setdefault(file, []).append(ident)
        for key in sorted({(s.file, s.fact.qualname) for s in sites}):
            by_function.setdefault(key, []).append(ident)
        names = set().union(*(guard_names(s) for s in sites)) - _COMMON_NAMES
        names_of[ident] = names
        for n in sorted(names):
            by_name.setdefault(n, []).append(ident)
    order = {i: (s[0].file, s[0].line, i) for i, s in sites_by_id.items()}
    out: dict[str, tuple[str, ...]] = {}
    for ident, sites in sites_by_id.items():
        chosen: list[str] = []
        by_line = lambda c: order[c]
        for key in sorted({(s.file, s.fact.qualname) for s in sites}):
            _add(chosen, ident, sorted(by_function.get(key, ()), key=by_line), limit)
        _add(chosen, ident, sorted(by_file.get(sites[0].file, ()), key=by_line), limit)
        shared: dict[str, int] = {}
        for n in names_of[ident]:
            group = by_name.get(n, ())
            if len(group) <= 50:  # a name tested everywhere relates nothing
                for other in group:
                    shared[other] = shared.get(other, 0) + 1
        _add(chosen, ident, sorted(shared, key=lambda o: (-shared[o], order[o])), limit)  # most shared names first
        out[ident] = tuple(chosen)
    return out


def _add(chosen: list[str], ident: str, candidates: Iterable[str], limit: int) -> None:
    for c in candidates:
        if c != ident and c not in chosen and len(chosen) < limit:
            chosen.append(c)


_COMMON_NAMES = {"len", "isinstance", "hasattr", "getattr", "any", "all", "str", "int", "type", "kwargs", "args",
                 "envs", "current_platform", "torch", "config"}


def message_pattern(template: str) -> str:
    """A regex matching concrete messages (ErrLookup's `messagePattern`): placeholders -> (.+?)."""
    parts, _ = template_parts(template)
    return "^" + "(.+?)".join(re.escape(p) for p in parts) + "$"


def github_url(ref: str, file: str, line: Optional[int] = None) -> str:
    url = f"https://github.com/vllm-project/vllm/blob/{quote(ref, safe='/')}/{quote(file, safe='/')}"
    return f"{url}#L{line}" if line else url
