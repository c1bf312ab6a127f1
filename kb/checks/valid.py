"""Valid values: for a predicted error, the values of each flag it reads with which no check that
reads that flag raises for this launch, the other inputs unchanged. Small domains only: the flag's choices, else
for a count 1 to 16, the powers of two to 1024 and the divisors of the other counts given, within
the vocabulary's minimum; at most MAX_CANDIDATES values tried per flag. For an error predicted by
a check derived from vLLM's guard (kb/checks/derive.py), the same over the derived checks that read
the flag, within the flag's pydantic constraints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from kb.checks.candidates import MAX_CANDIDATES
from kb.checks.candidates import flag_candidates as flag_candidates  # kept importable from here
from kb.checks.compiled import Derived, DerivedIndex
from kb.checks.facts import Facts, run
from kb.checks.launch import Launch
from kb.checks.predict import Outcome, predict
from kb.checks.vocab import INPUTS
from kb.configmodel import ConfigModel
from kb.model import Record


def candidates(name: str, launch: Launch) -> list[Any]:
    inp = INPUTS[name]
    if inp.type != "int":
        return []
    found = set(range(1, 17)) | {2**k for k in range(11)}
    for other, value in launch.values.items():
        if other != name and isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 4096 and \
                INPUTS.get(other) is not None and INPUTS[other].kind in ("flag", "hardware"):
            found |= {d for d in range(1, value + 1) if value % d == 0}
    low = inp.minimum if inp.minimum is not None else 0
    return sorted(v for v in found if v >= low)[:MAX_CANDIDATES]


def valid_values(records: Sequence[Record], outcome: Outcome, record: Record) -> dict[str, list[Any]]:
    """Flag -> the values with which every check reading the flag passes, for the flags the
    record's check reads."""
    check = record.entry.check if record.entry is not None else None
    if check is None:
        return {}
    out: dict[str, list[Any]] = {}
    for name in check.inputs:
        inp = INPUTS.get(name)
        if inp is None or inp.kind != "flag":
            continue
        reading = [r for r in records if r.entry is not None and r.entry.check is not None
                   and name in r.entry.check.inputs]
        good = []
        for v in candidates(name, outcome.launch):
            values = {**outcome.launch.values, name: v}
            trial = replace(outcome.launch, values=values, given={**outcome.launch.given, name: v})
            if not predict(reading, trial, messages=False).predicted:
                good.append(v)
        if good:
            out[inp.flags[0]] = good
    return out


def derived_valid_values(model: ConfigModel, index: DerivedIndex, facts: Facts, record_id: str,
                         templates: Mapping[str, str]) -> dict[str, list[Any]]:
    """Flag -> the values with which no derived check reading the flag raises, for the flags the
    record's derived checks read (the rest of the launch unchanged); only values kb can decide."""
    by_dest = {f.dest: f for f in model.flags}
    own = [c for c in index.checks if c.record_id == record_id]
    out: dict[str, list[Any]] = {}
    for dest in dict.fromkeys(r.key for c in own for r in c.refs if r.kind in ("flag", "flag-given")):
        flag = by_dest.get(dest)
        if flag is None:
            continue
        reading = [c for c in index.checks if any(r.key == dest and r.kind in ("flag", "flag-given") for r in c.refs)]
        reading.sort(key=lambda c: c.record_id != record_id)  # its own first: they reject a value most often
        good = [value for value in flag_candidates(flag, facts.flags)
                if _clean(reading, replace(facts, flags={**facts.flags, dest: value}), record_id, templates)]
        if good:
            out[flag.name] = good
    return out


def _clean(reading: Sequence[Derived], trial: Facts, record_id: str, templates: Mapping[str, str]) -> bool:
    """The record's own checks decided clean, and no other check reading the flag raises: the
    checks are run until one says otherwise (a value most checks reject costs one or two runs)."""
    for c in reading:
        raises = run(c, trial, templates.get(c.record_id, "")).raises
        if raises or (c.record_id == record_id and raises is not False):
            return False
    return True
