"""One launch checked as `kb check` does, against records and a flag model prepared once: vLLM's
parser (kb/checks/cli_parse.py), pydantic's field constraints (kb/checks/order.py), the checks
derived from vLLM's guards (kb/checks/derive.py), the curated checks (kb/checks/predict.py), each
error's valid values (kb/checks/valid.py). `kb check` and the oracle agreement bench call the same
function."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Optional

from kb.checks.cli_parse import ParseError, argument_name, has_parser, parse_command
from kb.checks.compiled import Derived, DerivedIndex
from kb.checks.computed import Hardware
from kb.checks.derive import derive
from kb.checks.evaluate import dropped
from kb.checks.facts import _MISSING, Facts, Verdict, facts_of, passed_value, reads_request, run
from kb.checks.jsonfields import refusal
from kb.checks.launch import ConfigFile, Launch, parse_launch, serve_words
from kb.checks.order import FieldError, constraint_error, position, pydantic_report, validation_failures
from kb.checks.predict import NotRun, Outcome, Prediction, Skipped, predict
from kb.checks.valid import derived_valid_values, valid_values
from kb.configmodel import ConfigModel
from kb.errors import OVER_BUDGET
from kb.model import RaiseSite, Record

# the last sites and flag model derived, with their index (held, so that no other list takes their ids)
_DERIVED: list[tuple[Sequence[Record], list[RaiseSite], ConfigModel, DerivedIndex]] = []


def derived_index(records: Sequence[Record], flags: ConfigModel) -> DerivedIndex:
    """The derived checks of the records' sites, once per flag model and sites in a row (the same
    objects: records rebuilt around the same sites, as the build's stages do, share it)."""
    if _DERIVED and _DERIVED[0][0] is records and _DERIVED[0][2] is flags:
        return _DERIVED[0][3]
    return derived_of([s for r in records for s in r.sites], flags, records)


def derived_of(sites: list[RaiseSite], flags: ConfigModel, records: Sequence[Record] = ()) -> DerivedIndex:
    """`derive(sites, flags)`, kept while the next call gives the same site objects and model."""
    if not _DERIVED or _DERIVED[0][2] is not flags or not _same(_DERIVED[0][1], sites):
        _DERIVED[:] = [(records, sites, flags, derive(sites, flags))]
    elif records:
        _DERIVED[0] = (records, *_DERIVED[0][1:])
    return _DERIVED[0][3]


def _same(a: Sequence[object], b: Sequence[object]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def check_one(records: Sequence[Record], flags: Optional[ConfigModel], argv: Sequence[str],
              model_config: Optional[ConfigFile] = None, hardware: Optional[dict[str, object]] = None,
              with_valid: bool = True, derived: Optional[DerivedIndex] = None,
              request: Optional[Mapping[str, Any]] = None) -> Outcome:
    """`request`: the sampling parameters of one request (SamplingParams' field -> value): its
    checks run too, after the launch's (vLLM starts first, then takes the request)."""
    launch = parse_launch(argv, model_config, hardware)
    if hardware:  # a hardware value refused there (infinite, 10**400 GiB) is unknown to every check
        hardware = {k: v for k, v in hardware.items() if k not in launch.bad}
    if flags is None or not has_parser(flags):
        outcome = predict(records, launch)
        return with_valid_values(records, outcome) if with_valid else outcome  # no parser: no derived checks
    parsed = parse_command(flags, serve_words(argv), platform="cuda")  # the platform kb check assumes
    if parsed.error is not None:
        return replace(predict(records, launch), parse_error=parsed.error, build_order=flags.build_order)
    index = derived if derived is not None else derived_index(records, flags)
    facts = facts_of(flags, parsed.values, model_config.data if model_config is not None else {},
                     hardware=Hardware.of(hardware), request=request)
    outcome = predict(records, with_computed(launch, facts))
    passed, undecided = passed_errors(index, facts)
    failures = tuple(validation_failures(flags, parsed.values, parsed.given, passed))
    outcome = with_derived(records, outcome, index, facts)
    outcome = parse_time(replace(outcome, validation=failures, build_order=flags.build_order), index, flags,
                         parsed.values, parsed.given)
    outcome = before_undecided(outcome, undecided)
    if with_valid:
        outcome = with_valid_values(records, outcome)
        templates = {r.id: r.template for r in records}
        valid = dict(outcome.valid)
        for p in outcome.predicted:
            if not valid.get(p.record.id):
                valid[p.record.id] = derived_valid_values(flags, index, facts, p.record.id, templates)
        outcome = replace(outcome, valid=valid)
    return with_dropped(records, outcome, index)


# the check vocabulary's inputs that kb computes as vLLM does (kb/checks/computed.py), by value
# name: what config.json gives (derived_max_model_len), and defaults vLLM computes, which replace
# the vocabulary's own fallback when the command does not give them (max_model_len)
FROM_CONFIG = {"derived_max_model_len": "derived_max_model_len"}
DEFAULTED = {"max_model_len": "max_model_len"}


def with_computed(launch: Launch, facts: Facts) -> Launch:
    """The launch with the inputs vLLM computes: from config.json where it does not give them by
    name, and the defaults of inputs the command does not give."""
    got = facts.computed.values
    add = {n: got[v] for n, v in FROM_CONFIG.items() if v in got and n not in launch.values and n not in launch.bad}
    defaults = {n: got[v] for n, v in DEFAULTED.items() if v in got and n not in launch.given and n not in launch.bad}
    if not add and not defaults:
        return launch
    sources = {**launch.sources, **dict.fromkeys(add, "config.json, as vLLM derives it"),
               **dict.fromkeys(defaults, "vLLM's default, as it computes it")}
    return replace(launch, values={**launch.values, **add, **defaults}, given={**launch.given, **add}, sources=sources)


def with_derived(records: Sequence[Record], outcome: Outcome, index: DerivedIndex, facts: Facts) -> Outcome:
    """The derived checks' predictions added to the curated ones: a record with a curated check
    keeps it (it refines its derived twin), unless the launch leaves the curated one undecided and
    the derived one decides; unknown ones are listed with what they need. A raise
    is predicted only when no check before it in the same function that reads a given flag is
    unknown: vLLM may stop there (configs with an undecided constraint: before_undecided)."""
    by_id: Mapping[str, Record] = {r.id: r for r in records}
    undecided = {s.record.id for s in outcome.skipped}
    curated = {r.id for r in records if r.entry is not None and r.entry.check is not None} - undecided
    seen = {p.record.id for p in outcome.predicted}
    ran: list[tuple[Derived, Record, Verdict]] = []
    for check in index.checks:
        r = by_id.get(check.record_id)
        if facts.request is None and reads_request(check):
            continue  # a check of a request's sampling parameters: no request given
        if r is not None and r.id not in curated and r.id not in seen:
            ran.append((check, r, run(check, facts, r.template)))
    # a curated check the launch does not decide gives way to its derived twin where that one does
    decided = {r.id for _, r, v in ran if r.id in undecided and v.raises is not None}
    outcome = replace(outcome, skipped=tuple(s for s in outcome.skipped if s.record.id not in decided))
    # the checks kb cannot decide for this launch, where they are: (file, function) -> [(line, what they need)]
    open_: dict[tuple[str, str], list[tuple[int, tuple[str, ...]]]] = {}
    # (only those reading a flag the command gives: one that reads only defaults passes as it does
    # when vLLM starts the model with its defaults)
    for check, r, verdict in ran:
        if verdict.raises is None and reads_given(check, facts):
            open_.setdefault(_where(check, r), []).append((check.line, verdict.missing))
    for s in outcome.skipped:
        if s.record.entry is not None and s.record.entry.check is not None and \
                any(i in outcome.launch.given for i in s.record.entry.check.inputs):
            for site in s.record.sites:
                open_.setdefault((site.file, site.fact.qualname), []).append((site.line, s.missing))
    predicted = list(outcome.predicted)
    unknown: dict[str, tuple[str, ...]] = {}
    for check, r, verdict in ran:
        if r.id in seen:
            continue
        if verdict.raises:
            before = [m for line, m in open_.get(_where(check, r), []) if line < check.line]
            if before:
                unknown.setdefault(r.id, tuple(dict.fromkeys(x for m in before for x in m)))
                continue
            predicted.append(Prediction(r, verdict.message))
            seen.add(r.id)
            unknown.pop(r.id, None)
        elif verdict.raises is None and verdict.missing:
            unknown.setdefault(r.id, verdict.missing)
    predicted.sort(key=lambda p: (p.record.file, p.record.line, p.record.id))
    return replace(outcome, predicted=tuple(predicted),
                   unknown=tuple(Skipped(by_id[i], m) for i, m in sorted(unknown.items()) if i not in seen))


def with_dropped(records: Sequence[Record], outcome: Outcome, index: DerivedIndex) -> Outcome:
    """The derived checks this command dropped, their evaluations past its work budget
    (kb/checks/evaluate.py COMMAND_WORK): not run, named where their guard is."""
    by_id = {r.id: r for r in records}
    done = {p.record.id for p in outcome.predicted} | {n.record.id for n in outcome.not_run}
    ids = dict.fromkeys(c.record_id for c in index.checks if c.record_id in by_id and c.record_id not in done
                        and dropped(c.expr))
    return replace(outcome, not_run=(*outcome.not_run, *(NotRun(by_id[i], OVER_BUDGET) for i in ids))) if ids else outcome


def before_undecided(outcome: Outcome, fields: Optional[Mapping[str, tuple[str, ...]]] = None) -> Outcome:
    """Only what vLLM meets before the first config with a pydantic constraint on a value kb cannot
    tell while the given flag breaks it (`fields`: config -> its fields): vLLM may stop there. What
    comes after is listed as unknown, needing those values."""
    order = dict(outcome.build_order)
    stops = [((order[c], 0, "", 0), (*names, f"(vLLM may stop first building {c})"))
             for c, names in (fields or {}).items() if c in order]
    if not stops:
        return outcome
    limit, need = min(stops, key=lambda s: s[0])
    kept = tuple(p for p in outcome.predicted if position(p.record, order) < limit)
    late = tuple(Skipped(p.record, need) for p in outcome.predicted if position(p.record, order) >= limit)
    validation = tuple(v for v in outcome.validation if (v.built_at, 0, "", 0) < limit)
    return replace(outcome, predicted=kept, validation=validation, unknown=(*outcome.unknown, *late))


def passed_errors(index: DerivedIndex, facts: Facts) -> tuple[dict[str, list[FieldError]], dict[str, tuple[str, ...]]]:
    """Config -> pydantic's constraint errors of what create_engine_config passes, for the values
    that read a flag the command gives (`--data-parallel-rank -1` passed as `data_parallel_rank`);
    and config -> the fields whose passed value kb cannot tell while the given value breaks the
    constraint (vLLM may change it first, or stop there)."""
    out: dict[str, list[FieldError]] = {}
    undecided: dict[str, tuple[str, ...]] = {}
    for p in index.passed:
        flags = [r for r in p.refs if r.kind in ("flag", "flag-given", "computed") and r.key in facts.flags]
        if not flags:
            continue
        value = passed_value(p, facts)
        if value is _MISSING:  # vLLM may change it first: undecided when the given value itself breaks it
            if any(constraint_error(p.field, r.shown, facts.flags[r.key], p.constraints) for r in flags):
                undecided[p.config_class] = (*undecided.get(p.config_class, ()), f"{p.config_class}.{p.field}")
            continue
        error = constraint_error(p.field, flags[0].shown, value, p.constraints)
        if error is not None:
            out.setdefault(p.config_class, []).append(error)
    return out, undecided


def reads_given(check: Derived, facts: Facts) -> bool:
    """The check reads a flag, or a key of a JSON-valued flag, that the command gives (or a field
    the request gives)."""
    for r in check.refs:
        if r.kind == "request" and facts.request is not None and r.key in facts.request:
            return True
        if r.kind in ("flag", "flag-given", "computed") and r.key in facts.flags:
            return True
        dest, _, key = r.key.partition(".")
        if r.kind == "flag-key" and isinstance(facts.flags.get(dest), dict) and key in facts.flags[dest]:
            return True
    return False


def _where(check: Derived, r: Record) -> tuple[str, str]:
    """Where an undecided check may stop vLLM before a later one: its function; for a request's
    checks the whole request model, whose checks run in the order of their lines."""
    return (check.file, "" if reads_request(check) else _function(r, check.line))


def _function(r: Record, line: int) -> str:
    return next((s.fact.qualname for s in r.sites if s.line == line), r.sites[0].fact.qualname)


def parse_time(outcome: Outcome, index: DerivedIndex, flags: ConfigModel, values: Mapping[str, Any],
               given: Sequence[str]) -> Outcome:
    """A JSON-valued flag that vLLM's parser turns into a config as soon as it reads it
    (`--engram-config '{...}'` is an EngramConfig there): pydantic validates its keys' types
    (kb/checks/jsonfields.py), then the config's own checks run (derived, kb/checks/derive.py). Either
    stops the command line, with argparse's `argument <flag>: ` and pydantic's report; the first
    such flag in the command is the error, the other predictions stay, after it."""
    if outcome.parse_error is not None:
        return outcome
    by_flag: dict[str, list[tuple[Derived, Prediction]]] = {}
    checks = {c.record_id: c for c in index.checks if c.parsed_by}
    for p in outcome.predicted:
        c = checks.get(p.record.id)
        if c is not None:
            by_flag.setdefault(c.parsed_by, []).append((c, p))
    into = {f.dest: f.parses_into for f in flags.flags if f.parses_into}
    for dest in given:
        value = values.get(dest)
        if dest not in into or not isinstance(value, dict):
            continue
        name = argument_name(flags, dest) or dest
        refused = refusal(flags, into[dest] or "", value)
        if refused is not None:
            return replace(outcome, parse_error=ParseError(refused.printed(name), name.split("/")[0], refused.exact))
        if dest in by_flag:
            check, first = min(by_flag[dest], key=lambda cp: cp[1].record.line)
            shown = value.get(check.field) if check.field else value
            message = f"argument {name}: " + pydantic_report(check.config_class, [
                (check.field, f"Value error, {first.message}", "value_error", shown)])
            return replace(outcome, parse_error=ParseError(message, name.split("/")[0], "{" not in first.message,
                                                           raised=first.record.id),
                           predicted=tuple(p for p in outcome.predicted if p is not first))
    return outcome


def with_valid_values(records: Sequence[Record], outcome: Outcome) -> Outcome:
    return replace(outcome, valid={p.record.id: valid_values(records, outcome, p.record) for p in outcome.predicted})



