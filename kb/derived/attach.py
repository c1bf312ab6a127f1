"""Every record with what kb derives for it (kb/derived/model.py): the condition in words for each
error whose guard names something users set, and for each error kb derives a launch check for
(kb/checks/derive.py) the valid values and a proved example fix. One stage, as attach_set_by is:
the site build, the MkDocs plugin, `kb explain`'s index and the MCP server call it.

The example fixes run `kb check` some thousand times (seconds): the result is kept in the cache,
named by a digest of everything it is made from (kb's code, the flag model, each record's raise
sites and curated check), so that a build of the same release and entries reads it. Workers share
the search when `jobs` > 1; the output does not depend on them."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor, Future
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

from kb.checks.compiled import Derived, DerivedIndex
from kb.checks.evaluate import work_budget
from kb.checks.launch_check import derived_of
from kb.config.resolve import SetByReader
from kb.configmodel import ConfigModel
from kb.derived.domains import Pool, constant_pool
from kb.derived.fix import find_fix
from kb.derived.meaning import condition_words, inputs_text, meaning_text
from kb.derived.values import message_checks
from kb.derivedmodel import DERIVED_FORMAT, DerivedFix, DerivedGuidance
from kb.errors import OVER_BUDGET
from kb.files import write_atomic
from kb.model import Record

PARALLEL_FIXES = 40  # errors with a derived check from which worker processes share the search


def live(r: Record) -> bool:
    """An error the built release raises (not a removed error's page, built from an older release)."""
    return r.removed_since is None and r.ref is None


def digest(records: Sequence[Record], model: ConfigModel) -> str:
    from kb.checks.index import code_digest

    h = hashlib.sha256(code_digest().encode())
    h.update(json.dumps(model.to_json(), sort_keys=True, default=str).encode())
    for r in records:
        if not live(r):
            continue
        check = r.entry.check if r.entry is not None else None
        h.update(json.dumps([r.id, r.file, r.template, [s.fact.to_json() for s in r.sites], repr(check),
                             r.checked], default=str).encode())
    return h.hexdigest()[:32]


def attach_derived(records: Sequence[Record], model: Optional[ConfigModel], jobs: int = 1,
                   cache: Optional[Path] = None) -> list[Record]:
    """The records with `derived` set where kb derives anything; `cache`: the folder the result is
    kept in (None: computed every time)."""
    if model is None:
        return list(records)
    path = cache / "derived" / f"{digest(records, model)}.json" if cache is not None else None
    found = _load(path) if path is not None else None
    if found is None:
        found = derive_guidance(records, model, jobs)
        if path is not None:
            with contextlib.suppress(OSError):  # a cache that cannot be written only costs time
                # in the order found, not sorted: a page writes a fix's config.json keys and
                # request fields as they come, so a build reading the cache writes what one computing it does
                write_atomic(path, json.dumps({"format": DERIVED_FORMAT,
                                               "guidance": {k: v.to_json() for k, v in sorted(found.items())}},
                                              ensure_ascii=False, separators=(",", ":")) + "\n")
    return [replace(r, derived=found[r.id]) if r.id in found and live(r) else r for r in records]


def over_budget(records: Sequence[Record]) -> list[str]:
    """A located warning for each error whose derived check exceeds the command's work budget
    (kb/checks/evaluate.py COMMAND_WORK): its fix search stopped there."""
    return [f"{r.file}:{r.line}: check not run: {OVER_BUDGET}" for r in records
            if r.derived is not None and r.derived.no_fix == OVER_BUDGET]


def _load(path: Path) -> Optional[dict[str, DerivedGuidance]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != DERIVED_FORMAT:
            raise ValueError(f"not {DERIVED_FORMAT}")
        return {k: DerivedGuidance.from_json(v) for k, v in data["guidance"].items()}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        path.unlink(missing_ok=True)  # damaged: computed again
        return None


def derive_guidance(records: Sequence[Record], model: ConfigModel, jobs: int = 1) -> dict[str, DerivedGuidance]:
    """Record id -> its derived guidance, for the live records kb derives anything for."""
    current = [r for r in records if live(r)]
    index = derived_of([s for r in current for s in r.sites], model)  # verify_records' index, when the same sites
    by_id: dict[str, list[Derived]] = {}
    for c in index.checks:
        by_id.setdefault(c.record_id, []).append(c)
    search = _FixSearch(current, sorted(by_id), model, index, jobs)  # worker processes start on the fixes
    try:
        reader = SetByReader(model)
        out: dict[str, DerivedGuidance] = {}
        for r in current:  # while they search, the words here
            text, reading, labels = condition_words(r, by_id.get(r.id, []), reader, model)
            if text:
                out[r.id] = DerivedGuidance(meaning_text(r, text), text, inputs_text(labels, model), reading)
        with work_budget():  # each derived check's evaluations in all, bounded (kb/checks/evaluate.py)
            fixes = search.result()
    finally:
        search.close()
    for ident, (fix, valid, why) in fixes.items():
        base = out.get(ident, DerivedGuidance())
        out[ident] = replace(base, fix=fix, valid=valid, no_fix=why)
    for ident, checks in by_id.items():  # what `kb explain` evaluates for a paste's own values
        shown = message_checks(checks, model)
        if shown:
            out[ident] = replace(out.get(ident, DerivedGuidance()), message_checks=shown)
    return {k: v for k, v in out.items() if not v.empty or v.no_fix or v.message_checks}


_Fixed = tuple[Optional[DerivedFix], tuple[tuple[str, tuple[Any, ...]], ...], str]


class _FixSearch:
    """Id -> (the proved fix, the valid values, why there is no fix) for each id with a derived
    check: with `jobs` > 1 and enough of them, searched in worker processes from the start, else
    here when the result is asked for."""

    def __init__(self, records: Sequence[Record], ids: Sequence[str], model: ConfigModel, index: DerivedIndex,
                 jobs: int) -> None:
        from kb.fit.launch import fit_error_key

        wanted = set(ids)
        # what `kb check` reads: the records of the checks (curated and derived) and of the memory errors
        self.checked = [r for r in records if r.id in wanted or (r.entry is not None and r.entry.check is not None)
                        or fit_error_key(r.template) is not None]
        self.ids, self.model, self.index = list(ids), model, index
        self.pool = constant_pool(index)
        self.workers: Optional[Executor] = None
        self.parts: list[Future[dict[str, _Fixed]]] = []
        if jobs > 1 and len(ids) >= PARALLEL_FIXES:
            from kb.workers import worker_pool

            self.workers = worker_pool(jobs)
            self.parts = [self.workers.submit(_fix_chunk, list(ids[i::jobs * 2]), self.checked, model, index,
                                              self.pool) for i in range(jobs * 2)]

    def result(self) -> dict[str, _Fixed]:
        if self.workers is None:
            return _fix_chunk(self.ids, self.checked, self.model, self.index, self.pool)
        return {k: v for part in self.parts for k, v in part.result().items()}

    def close(self) -> None:
        if self.workers is not None:
            self.workers.shutdown(wait=True, cancel_futures=True)


def _fix_chunk(ids: Sequence[str], records: Sequence[Record], model: ConfigModel, index: DerivedIndex,
               pool: Pool) -> dict[str, _Fixed]:
    by_id: Mapping[str, Record] = {r.id: r for r in records}
    out: dict[str, _Fixed] = {}
    with work_budget():  # a worker's chunk: its own budget (in the caller's process: the caller's)
        found_all = {ident: find_fix(by_id[ident], records, model, index, pool) for ident in ids}
    for ident, found in found_all.items():
        fix = None
        if found.fix is not None:
            fix = DerivedFix(found.fix.before, found.fix.after, found.change, dict(found.fix.model_config),
                             dict(found.fix.hardware), found.fix.request_before, found.fix.request_after)
        valid = tuple((flag, tuple(values)) for flag, values in found.valid.items()) if fix is not None else ()
        out[ident] = (fix, valid, "" if fix is not None else found.reason)
    return out
