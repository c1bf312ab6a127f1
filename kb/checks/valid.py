"""Valid values: for a predicted error, the values of each flag it reads with which no check that
reads that flag raises for this launch, the other inputs unchanged. Small domains only: the flag's choices, else
for a count 1 to 16, the powers of two to 1024 and the divisors of the other counts given, within
the vocabulary's minimum; at most MAX_CANDIDATES values tried per flag."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from kb.checks.launch import Launch
from kb.checks.predict import Outcome, predict
from kb.checks.vocab import INPUTS
from kb.model import Record

MAX_CANDIDATES = 64


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
            if not predict(reading, trial).predicted:
                good.append(v)
        if good:
            out[inp.flags[0]] = good
    return out
