"""What `kb check` needs of a release, kept in the cache as one JSON file: the records that have a
check (curated, or derived from vLLM's guards), the flag model and the derived checks. Built by
the first `kb check` of a release wheel and read by the next ones, which then neither rescan,
reload the curated YAML nor re-verify it. Keyed by the wheel file (name, size, modification
time), the curated entries (every file's name and bytes) and kb's own code, so a change of any of
them builds it again; trees without a stamp (a folder, a git ref) are not indexed. A file that
cannot be read is built again. JSON only: nothing read from the cache is executed."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from kb.checks.compiled import DerivedIndex
from kb.configmodel import ConfigModel
from kb.files import compact_json, write_atomic
from kb.model import Case, Check, Entry, Excerpt, RaiseFact, RaiseSite, Record

INDEX_FORMAT = "kb-check-index/1"
_KB = Path(__file__).resolve().parent.parent


def code_digest() -> str:
    """Of every Python file of kb: a new kb builds its indexes again."""
    h = hashlib.sha256()
    for p in sorted(_KB.rglob("*.py")):
        h.update(str(p.relative_to(_KB)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def folder_digest(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(folder)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def index_path(cache: Path, wheel: Path, errors: Path, include_vendored: bool) -> Path:
    st = wheel.stat()
    key = json.dumps([code_digest(), wheel.name, st.st_size, st.st_mtime_ns, folder_digest(errors), include_vendored])
    return cache / "check-index" / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"


def to_json(records: Sequence[Record], model: ConfigModel, derived: DerivedIndex) -> dict[str, Any]:
    wanted = {c.record_id for c in derived.checks}
    from kb.fit.launch import fit_error_key

    # the records of the checks, and of the memory errors kb fit names (kb check --gpu runs it too)
    kept = [r for r in records if r.id in wanted or (r.entry is not None and r.entry.check is not None)
            or fit_error_key(r.template) is not None]
    return {"format": INDEX_FORMAT, "records": [_record(r) for r in kept], "config": model.to_json(),
            "derived": derived.to_json()}


def from_json(d: dict[str, Any]) -> tuple[list[Record], ConfigModel, DerivedIndex]:
    """ValueError, KeyError, TypeError or IndexError on another shape."""
    if d.get("format") != INDEX_FORMAT:
        raise ValueError(f"not {INDEX_FORMAT}")
    derived = DerivedIndex.from_json(d["derived"])
    for c in derived.checks:  # the shapes the checks are read with; anything else is a damaged file
        if not all(isinstance(x, str) for x in (c.record_id, c.file, c.expr, c.parsed_by, c.config_class, c.field)) \
                or not all(isinstance(v, str) for r in c.refs for v in (r.name, r.kind, r.key, r.shown)):
            raise TypeError("a derived check of another shape")
    return [_record_of(r) for r in d["records"]], ConfigModel.from_json(d["config"]), derived


def load(path: Path) -> Optional[tuple[list[Record], ConfigModel, DerivedIndex]]:
    try:
        return from_json(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError):
        path.unlink(missing_ok=True)  # damaged: built again
        return None


def save(path: Path, records: Sequence[Record], model: ConfigModel, derived: DerivedIndex) -> None:
    with contextlib.suppress(OSError):  # a cache that cannot be written only costs time
        write_atomic(path, compact_json(to_json(records, model, derived)))


def _record(r: Record) -> dict[str, Any]:
    e = r.entry
    entry = None if e is None else {
        "id": e.id, "path": e.path, "meaning": e.meaning, "solutions": list(e.solutions),
        "check": None if e.check is None else {
            "inputs": list(e.check.inputs), "raisesWhen": e.check.raises_when, "bindings": e.check.bindings,
            "cases": [[c.inputs, c.raises, c.line] for c in e.check.cases], "sourceCheck": e.check.source_check,
            "sourceReason": e.check.source_reason, "line": e.check.line, "reachedWhen": e.check.reached_when}}
    return {"id": r.id, "slug": r.slug, "title": r.title, "template": r.template, "class": r.exception_class,
            "subsystem": r.subsystem, "checked": r.checked, "entry": entry,
            "sites": [[s.id, s.file, s.fact.to_json(), s.exception_class] for s in r.sites]}


def _record_of(d: dict[str, Any]) -> Record:
    e = d["entry"]
    entry = None
    if e is not None:
        c = e["check"]
        check = None if c is None else Check(
            tuple(c["inputs"]), c["raisesWhen"], dict(c["bindings"]),
            tuple(Case(dict(x[0]), bool(x[1]), int(x[2])) for x in c["cases"]), c["sourceCheck"], c["sourceReason"],
            int(c["line"]), c["reachedWhen"])
        entry = Entry(e["id"], e["path"], e["meaning"], solutions=tuple(e["solutions"]), check=check)
    sites = tuple(RaiseSite(s[0], s[1], RaiseFact.from_json(s[2]), s[3], Excerpt(int(s[2][0]), ())) for s in d["sites"])
    return Record(d["id"], d["slug"], d["title"], d["template"], d["class"], sites, d["subsystem"], (), entry,
                  checked=bool(d["checked"]))
