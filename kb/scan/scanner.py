"""A vLLM tree -> ScanResult: every raise of ValueError (or of a chosen set of classes).

Files are parsed in worker processes (`jobs`), their facts cached by content hash; the
exception classes are then resolved across the whole tree (a class subclassing ValueError
anywhere, transitively, by name), and each matching raise becomes a `RaiseSite` with its id
and a 37-line excerpt.
"""

from __future__ import annotations

import builtins
import gc
import hashlib
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from typing import Optional

from kb.errors import Located, ScanError
from kb.model import Builder, ClassFact, Excerpt, FileFacts, RaiseFact, RaiseSite, ScanResult
from kb.scan.defaults import DEFAULT_EXCEPTIONS, TREE, Progress
from kb.scan.extract import extract, may_hold_facts
from kb.scan.factcache import FactCache
from kb.scan.ids import ID_SCHEME, error_id
from kb.scan.messages import visible
from kb.scan.source import Tree
from kb.workers import worker_pool

EXCERPT_RADIUS = 18
ALL = "all"


def scan(
    tree: Tree,
    exceptions: Sequence[str] = DEFAULT_EXCEPTIONS,
    jobs: Optional[int] = None,
    cache: Optional[FactCache] = None,
    progress: Optional[Progress] = None,
    strict: bool = False,
    pool: Optional[Executor] = None,
) -> ScanResult:
    """`pool`: worker processes to reuse (several releases in a row); else made for this scan."""
    paths = list(tree.paths)
    data: dict[str, bytes] = {}

    def read(path: str) -> bytes:
        if path not in data:
            data[path] = tree.read(path)
        return data[path]

    # A wheel names each member's CRC and size: unchanged files need not even be decompressed.
    stamp = tree.stamp if (tree.stamp is not None and not strict) else None
    facts, keys = _facts(paths, read, stamp, jobs, cache, progress, parse_all=strict, pool=pool)
    warnings = tree.warnings + tuple(
        Located(path, line, message) for path, f in zip(paths, facts)
        for line, message in ([f.error] if f.error is not None else []) + sorted(f.skipped)
    )
    if strict and warnings:
        unparsed = sum(f.error is not None for f in facts)
        what = f"{unparsed} file(s) could not be parsed" if unparsed == len(warnings) else f"{len(warnings)} scan warning(s)"
        raise ScanError(f"{what} (--strict); first: {warnings[0]}")
    chosen = resolve_exceptions(exceptions, (c for f in facts for c in f.classes))
    built = _Builders(paths, facts)
    sites: list[RaiseSite] = []
    file_keys: dict[str, str] = {}
    for path, f, key in zip(paths, facts, keys):
        matching = [r for r in f.raises if chosen is None or r.exception_name in chosen]
        if not matching:
            continue
        file_keys[path] = key
        lines = source_lines(read(path))
        quotes = _QuoteCounter(lines)
        for r in sorted(matching, key=lambda r: r.line):
            e = excerpt(lines, r.line)
            sites.append(RaiseSite(error_id(r.template, path), path, _visible(built.parts_of(r, path)), r.exception_name,
                              Excerpt(e.start, e.lines, quotes.open_before(e.start))))
    size = tree.size if tree.size is not None else (lambda p: len(read(p)))
    return ScanResult(
        tree=tree.info,
        id_scheme=ID_SCHEME,
        exceptions=tuple(sorted(chosen)) if chosen is not None else (ALL,),
        sites=tuple(sites),
        files=len(paths),
        bytes=sum(size(p) for p in paths),
        excluded_files=tree.excluded,
        warnings=warnings,
        file_keys=file_keys,
    )


class _Builders:
    """The message builders of the whole tree (kb.scan.builders.builders), by name: one in the
    raise's own file first, else the only one of that name in the tree. An exception class
    without one of its own takes its nearest base's."""

    def __init__(self, paths: Sequence[str], facts: Sequence[FileFacts]) -> None:
        self.by_name: dict[tuple[str, str], list[tuple[str, Builder]]] = {}
        self.bases: dict[str, set[str]] = {}
        for path, f in zip(paths, facts):
            for b in f.builders:
                self.by_name.setdefault((b.kind, b.name), []).append((path, b))
            for c in f.classes:
                self.bases.setdefault(c.name, set()).update(c.bases)

    def find(self, kind: str, name: str, path: str) -> Optional[Builder]:
        found = self.by_name.get((kind, name), [])
        here = [b for p, b in found if p == path]
        if here:
            return here[0]
        return found[0][1] if len(found) == 1 else None

    def exception(self, name: str, path: str) -> Optional[Builder]:
        seen: set[str] = set()
        todo = [name]
        while todo and len(seen) < 20:  # nearest base first
            current = todo.pop(0)
            if current in seen:
                continue
            seen.add(current)
            b = self.find("exception", current, path)
            if b is not None:
                return b
            todo += sorted(self.bases.get(current, ()))
        return None

    def parts_of(self, r: RaiseFact, path: str) -> RaiseFact:
        """The raise with the templates of its builders added to its parts."""
        extra: list[str] = []
        if r.builder:
            b = self.find("function", r.builder, path)
            if b is not None:
                extra += b.templates
        b = self.exception(r.exception_name, path)
        if b is not None:
            extra += b.bare if r.message_kind == "none" else b.templates
        extra = [t for t in dict.fromkeys(extra) if t != r.template and t not in r.parts]
        return replace(r, parts=r.parts + tuple(extra)) if extra else r


def resolve_exceptions(roots: Sequence[str], classes: Iterable[ClassFact]) -> Optional[set[str]]:
    """The names of `roots` and of every class that subclasses one of them, transitively.

    Builtin subclasses count (UnicodeDecodeError is a ValueError); classes of the scanned
    tree are matched by name across modules. `vllm` stands for every exception class the tree
    defines (a class whose bases lead to a builtin exception). None means every class (`all`).
    """
    if ALL in roots:
        return None
    classes = list(classes)
    chosen = set(roots) - {TREE}
    if TREE in roots:
        chosen |= resolve_exceptions(["BaseException"], classes) or set()
        chosen -= _BUILTIN_EXCEPTIONS - set(roots)  # the tree's classes, not every builtin
    for name in dir(builtins):
        obj = getattr(builtins, name)
        if isinstance(obj, type) and issubclass(obj, BaseException) and any(
                isinstance(getattr(builtins, r, None), type) and issubclass(obj, getattr(builtins, r)) for r in roots):
            chosen.add(name)
    bases: dict[str, set[str]] = {}
    for c in classes:
        bases.setdefault(c.name, set()).update(c.bases)
    changed = True
    while changed:
        changed = False
        for name, parents in bases.items():
            if name not in chosen and parents & chosen:
                chosen.add(name)
                changed = True
    return chosen


_BUILTIN_EXCEPTIONS = {n for n in dir(builtins) if isinstance(getattr(builtins, n), type)
                       and issubclass(getattr(builtins, n), BaseException)}


def source_lines(data: bytes) -> list[str]:
    """The file's lines as `ast` numbers them (\\n, \\r\\n and \\r end a line, nothing else)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


EXCERPT_LINE_MAX = 1_000  # vLLM's longest is 250; a megabyte line would fill every page near it


def excerpt(lines: list[str], line: int, radius: int = EXCERPT_RADIUS) -> Excerpt:
    last = len(lines) - 1 if lines and lines[-1] == "" else len(lines)
    start = max(1, line - radius)
    end = min(last, line + radius)
    return Excerpt(start, tuple(visible(t if len(t) <= EXCERPT_LINE_MAX else t[:EXCERPT_LINE_MAX] + "…")
                                for t in lines[start - 1 : end]))


def _visible(r: RaiseFact) -> RaiseFact:
    """The raise with bidirectional controls in its message shown as escapes (its id, computed
    before, stays that of vLLM's own message)."""
    template, parts = visible(r.template), tuple(visible(p) for p in r.parts)
    return replace(r, template=template, parts=parts) if (template, parts) != (r.template, r.parts) else r


class _QuoteCounter:
    """Which triple quote is left open before a line, by counting triple quotes above it (a
    cheap heuristic: quotes inside comments or other strings can fool it; it only steers the
    colours of an excerpt). Lines must be asked for in increasing order: one pass per file."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.at = 1
        self.double = self.single = 0

    def open_before(self, line: int) -> str:
        if line > self.at:
            chunk = "\n".join(self.lines[self.at - 1 : line - 1])
            self.double += chunk.count('"""')
            self.single += chunk.count("'''")
            self.at = line
        if self.double % 2:
            return '"""'
        if self.single % 2:
            return "'''"
        return ""


def content_key(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=20).hexdigest()


_NOTHING = FileFacts()


def _facts(paths: list[str], read: Callable[[str], bytes], stamp: Optional[Callable[[str], str]],
           jobs: Optional[int], cache: Optional[FactCache], progress: Optional[Progress],
           parse_all: bool = False, pool: Optional[Executor] = None) -> tuple[list[FileFacts], list[str]]:
    """Facts of every file, in order, and the cache key of each.

    The key is the file's content hash, or the stamp its source gives for it (a wheel's CRC
    and size). Files that cannot hold a site are not parsed unless `parse_all` (--strict),
    which parses every file so that any syntax error is reported."""
    keys: list[str] = []
    for path in paths:
        if stamp is not None:
            keys.append(stamp(path))
        else:
            d = read(path)
            keys.append(content_key(d) if parse_all or may_hold_facts(d) else "")
    known = cache.get_many({k for k in keys if k}) if cache is not None else {}
    known[""] = _NOTHING
    fresh: dict[str, FileFacts] = {}
    missing: dict[str, bytes] = {}
    for key, path in zip(keys, paths):
        if key in known or key in missing or key in fresh:
            continue
        d = read(path)
        if not parse_all and not may_hold_facts(d):
            fresh[key] = _NOTHING  # remembered under its stamp: next time it is not even read
        else:
            missing[key] = d
    per_key = Counter(keys)
    total = len(paths)
    done = total - sum(per_key[k] for k in missing)
    if progress:
        progress(done, total)
    with _no_gc():
        _extract_missing(missing, per_key, jobs, fresh, progress, done, total, pool)
    if cache is not None:
        cache.put_many(fresh)
    known.update(fresh)
    return [known[k] for k in keys], keys


@contextmanager
def _no_gc() -> Iterator[None]:
    """Parsing makes millions of short-lived, acyclic objects; the cyclic collector would
    otherwise rescan everything kept so far over and over (a fifth of a cold scan)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _extract_missing(missing: dict[str, bytes], per_key: Counter[str], jobs: Optional[int],
                     fresh: dict[str, FileFacts], progress: Optional[Progress], done: int, total: int,
                     pool: Optional[Executor] = None) -> None:
    workers = jobs if jobs is not None else (os.cpu_count() or 1)
    order = list(missing)
    if workers <= 1 or len(order) < 8:
        for key in order:
            fresh[key] = extract(missing[key])
            done += per_key[key]
            if progress:
                progress(done, total)
    else:
        chunks = _chunks(order, missing, workers * 8)
        with ExitStack() as stack:
            if pool is None:
                pool = stack.enter_context(worker_pool(workers))
            for chunk, results in zip(chunks, pool.map(_extract_many, ([missing[k] for k in c] for c in chunks))):
                fresh.update(zip(chunk, results))
                done += sum(per_key[k] for k in chunk)
                if progress:
                    progress(done, total)


def _extract_many(datas: list[bytes]) -> list[FileFacts]:
    with _no_gc():
        return [extract(d) for d in datas]


def _chunks(order: list[str], data: dict[str, bytes], count: int) -> list[list[str]]:
    """About `count` chunks of similar byte size, largest files first for balance."""
    by_size = sorted(order, key=lambda k: -len(data[k]))
    chunks: list[list[str]] = [[] for _ in range(min(count, len(order)))]
    sizes = [0] * len(chunks)
    for key in by_size:
        i = sizes.index(min(sizes))
        chunks[i].append(key)
        sizes[i] += len(data[key])
    return [c for c in chunks if c]
