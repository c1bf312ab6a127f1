#!/usr/bin/env python3
"""Real vLLM on launches aimed at the checks kb derives from vLLM's guards (kb/checks/derive.py):
for each derived check whose inputs are all launch-time facts, the first one- or two-flag change
of a plain Llama launch with which kb predicts that error first, and the same launch with a value
kb predicts clean. kb only proposes the launches; the labels are what the real vLLM did. Added to the cases already
in tests/data/oracle-derived-<version>.json (a launch run again replaces its old outcome), which
the default tests read (tests/test_agreement.py).

    python3 bench/oracle/derived_cases.py [--version 0.33.0] [--jobs 2] [--limit 80] [--replay 0.33.0]
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
from common import DEFAULT_VERSION, recorded, run_all, write_cases
from parse_cases import LLAMA

NUMBERS = ("0", "1", "2", "3", "4", "8", "16", "64", "1024", "-1", "0.5", "1.5")


def candidates(flag: Any, expr: str) -> list[list[str]]:
    """The words that set a flag to each value worth trying."""
    name = flag.name
    if flag.action in ("store_true", "boolean") or flag.value_type == "bool" or flag.type == "bool":
        no = f"--no-{name[2:]}"
        return [[name], [no]] if flag.action == "boolean" else [[name]]
    if flag.choices:
        return [[name, str(c)] for c in flag.choices if isinstance(c, (str, int))][:24]
    strings = sorted(set(re.findall(r"'([A-Za-z0-9_.-]{1,40})'", expr)))
    if flag.value_type in ("int", "float") or flag.type in ("int", "float"):
        return [[name, v] for v in NUMBERS]
    return [[name, s] for s in strings]  # a path or a name: only the words vLLM's condition compares with


JSON_VALUES: tuple[Any, ...] = (True, False, 0, 1, 2, -1, "")


def typed(default: Any, strings: list[str]) -> tuple[Any, ...]:
    """Values of the type of a JSON key's default (pydantic refuses the others before any check)."""
    if isinstance(default, bool):
        return (not default, default)
    if isinstance(default, int):
        return (0, -1, 1, 2, 64)
    if isinstance(default, float):
        return (0.0, -1.0, 0.5, 2.0)
    if isinstance(default, str):
        return (*strings, "", "x")
    if isinstance(default, list):
        return ([], ["x"], ["x", "x"], *([s] for s in strings))
    return (*strings, *JSON_VALUES)


def ref_options(check: Any, by_dest: dict[str, Any], defaults: dict[str, Any]) -> list[list[tuple[str, Any]]]:
    """For each value the check reads that a launch sets: the (flag words or JSON key, value) to try."""
    strings = sorted(set(re.findall(r"'([A-Za-z0-9_.-]{1,40})'", check.expr)))
    out: list[list[tuple[str, Any]]] = []
    for r in check.refs:
        if r.kind in ("flag", "flag-given") and r.key in by_dest:
            out.append([("words", w) for w in candidates(by_dest[r.key], check.expr)])
        elif r.kind == "flag-key":
            dest, _, key = r.key.partition(".")
            if dest in by_dest:
                out.append([("json", (by_dest[dest].name, key, v)) for v in typed(defaults.get(r.key), strings)])
    return [o for o in out if o]


def words(trial: list[tuple[str, Any]]) -> list[str]:
    """A trial as command words: flags as they are, JSON keys merged into one object per flag."""
    out: list[str] = []
    objects: dict[str, dict[str, Any]] = {}
    for kind, value in trial:
        if kind == "words":
            out += value
        else:
            flag, key, v = value
            objects.setdefault(flag, {})[key] = v
    for flag, obj in objects.items():
        out += [flag, json.dumps(obj, sort_keys=True)]
    return out


def aimed(version: str, limit: int) -> list[dict[str, Any]]:
    """The launches that kb's scan of `version` aims at its derived checks (a hit and a clean one each)."""
    from kb.checks.facts import facts_of
    from kb.checks.launch import ConfigFile
    from kb.checks.launch_check import check_one, derived_index
    from kb.checks.predict import Prediction
    from kb.jobs import curated_records, scan_release
    from kb.scan.source import SourceSpec

    scan = scan_release(SourceSpec(vllm_version=version))
    records = curated_records([("", scan)], None).records
    assert scan.config is not None
    index = derived_index(records, scan.config)
    by_dest = {f.dest: f for f in scan.config.flags}
    config = ConfigFile("config.json", LLAMA)
    facts = facts_of(scan.config, {}, LLAMA)  # the defaults of the keys of JSON-valued flags

    def first(argv: list[str]) -> Optional[str]:
        out = check_one(records, scan.config, ["vllm", "serve", "org/model", *argv[1:]], config, {"gpu_count": 8},
                        with_valid=False)
        if out.parse_error is not None:
            return "parse"
        events = out.in_order()
        return events[0].record.id if events and isinstance(events[0], Prediction) else (
            "other" if events else None)

    todo: list[dict[str, Any]] = []
    aimed: set[str] = set()
    for check in index.checks:
        if check.record_id in aimed:
            continue
        options = ref_options(check, by_dest, facts.key_defaults)
        if not options:
            continue
        tries = [[o] for opts in options for o in opts]
        tries += [[a, b] for o1, o2 in itertools.combinations(options, 2) for a in o1[:10] for b in o2[:10]]
        tries += [[a, b, c] for o1, o2, o3 in itertools.combinations(options, 3)
                  for a in o1[:4] for b in o2[:4] for c in o3[:4]]
        hit = next((words(t) for t in tries[:150] if first(["$MODEL", *words(t)]) == check.record_id), None)
        if hit is None:
            continue
        aimed.add(check.record_id)
        clean = next((words(t) for t in tries[:150] if words(t)[:1] == hit[:1] and first(["$MODEL", *words(t)]) is None),
                     None)
        for argv in (hit, clean):
            if argv is not None:
                todo.append({"argv": ["$MODEL", *argv], "config": LLAMA, "hardware": {"count": 8},
                             "aimed_at": check.record_id})
        if len(todo) >= limit:
            break
    print(f"{len(todo)} launches aimed at {len({c['aimed_at'] for c in todo})} derived checks; running real vLLM",
          flush=True)
    return todo


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default=DEFAULT_VERSION)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--limit", type=int, default=80)
    ap.add_argument("--replay", metavar="VERSION",
                    help="run the launches recorded for this release (tests/data/oracle-derived-VERSION.json) "
                         "again on --version, instead of aiming new ones with kb's scan")
    args = ap.parse_args()
    if args.replay:
        todo = [{k: c[k] for k in ("argv", "config", "hardware")} for c in recorded("derived", args.replay)]
        print(f"{len(todo)} launches recorded for {args.replay}; running real vLLM", flush=True)
    else:
        todo = aimed(args.version, args.limit)
    records_out = run_all(todo, args.version, args.jobs, ("config", "hardware"))
    kept = recorded("derived", args.version)  # real outcomes already recorded
    seen = {json.dumps(c["argv"]) for c in records_out}
    write_cases("derived", args.version, [c for c in kept if json.dumps(c["argv"]) not in seen] + records_out,
                "derived_cases.py")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
