"""Every curated check proves itself before anything is rendered: its cases against its own
condition and, unless manual, against vLLM's scanned guard (cross-validation) and against the
check kb derives from that guard where it decides the case (kb/checks/derive.py); its example fix
through `kb check` (before predicts the error, after predicts none)."""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from kb.checks.cli_parse import has_parser, parse_command
from kb.checks.compiled import DerivedIndex
from kb.checks.derive import derive
from kb.checks.evaluate import evaluate, substitute
from kb.checks.facts import Facts, facts_of, run
from kb.checks.launch import ConfigFile, command_words, parse_launch, serve_words
from kb.checks.launch_check import check_one
from kb.checks.order import validation_failures
from kb.checks.predict import NotRun, bindings_of, locals_of, predict
from kb.checks.vocab import INPUTS, UNKNOWN
from kb.configmodel import ConfigModel
from kb.errors import ExprError, Located, MissingInput, UsageError
from kb.model import Check, ExampleFix, RaiseSite, Record


def verify_records(records: Sequence[Record], config: Optional[ConfigModel] = None) -> dict[str, list[Located]]:
    """The problems of every record whose entry has a check or a `vllm serve` example fix (an
    empty list: it is verified). With the release's flag model, both sides of an example fix
    must also pass vLLM's parser. An entry without a check proves its fix through the checks kb
    derives from vLLM's guards, as `kb check` runs them."""
    out: dict[str, list[Located]] = {}
    curated = [r for r in records if r.entry is not None and r.entry.check is not None]
    twins = derive([s for r in curated for s in r.sites], config) if config is not None and has_parser(config) else None
    for r in curated:
        problems = verify_check(r)
        if twins is not None and config is not None:
            problems += verify_twin(r, twins, config)
        if r.entry is not None and r.entry.example_fix is not None:
            problems += verify_example_fix(r, records, config)
        out[r.id] = list(dict.fromkeys(problems))  # a failing check meets both sides of a fix
    for r in records:
        e = r.entry
        if e is not None and e.check is None and e.example_fix is not None and e.example_fix.language == "shell":
            out[r.id] = list(dict.fromkeys(verify_example_fix(r, records, config)))
    return out


def case_facts(config: ConfigModel, inputs: Mapping[str, Any]) -> Facts:
    """A case's inputs (vocabulary names) as the facts a derived check reads: flags by their dest,
    config.json keys at their first path; the rest of the launch as vLLM's defaults."""
    flags: dict[str, Any] = {}
    model_config: dict[str, Any] = {}
    for name, value in inputs.items():
        inp = INPUTS.get(name)
        if inp is None:
            continue
        if inp.kind == "flag":
            flag = config.flag(inp.flags[0])
            if flag is not None and value is not None:  # null: the flag is not given (vLLM's default)
                flags[flag.dest] = value
        elif inp.kind == "config" and inp.paths:
            node = model_config
            *parents, last = inp.paths[0].split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[last] = value
    return facts_of(config, flags, model_config)


def verify_twin(r: Record, twins: DerivedIndex, config: ConfigModel) -> list[Located]:
    """Each case against the check kb derives from vLLM's guard for the same error, where that
    check decides it: a curated check may refine its derived twin, never contradict it."""
    e = r.entry
    assert e is not None and e.check is not None
    mine = [c for c in twins.checks if c.record_id == r.id]
    problems: list[Located] = []
    for case in e.check.cases if mine else ():
        facts = case_facts(config, case.inputs)
        verdicts = [run(c, facts, r.template).raises for c in mine]
        decided = [v for v in verdicts if v is not None]
        if not decided or any(decided) == case.raises:
            continue
        problems.append(Located(e.path, case.line, f"the check kb derives from vLLM's guard ({mine[0].file}:"
                                                    f"{mine[0].line}) gives {str(any(decided)).lower()} for this case, "
                                                    f"the case says {str(case.raises).lower()}"))
    return problems


def guard_site(r: Record) -> RaiseSite:
    """The site the entry was verified against, else the first."""
    e = r.entry
    if e is not None and e.verified is not None:
        for s in r.sites:
            if s.fact.guard == e.verified.guard:
                return s
    return r.sites[0]


def scanned_guard(r: Record, check: Check) -> ast.expr:
    """The scanned guard with the check's bindings and the site's locals substituted."""
    site = guard_site(r)
    guard = site.fact.guard or "True"
    return substitute(ast.parse(guard, mode="eval").body, bindings_of(check), locals_of(site))


def case_values(check: Check, inputs: Mapping[str, Any]) -> dict[str, Any]:
    values = dict(inputs)
    for name in check.inputs:
        if name not in values:
            default = INPUTS[name].default if name in INPUTS else UNKNOWN
            if default is not UNKNOWN:
                values[name] = default
    return values


def verify_check(r: Record) -> list[Located]:
    """Run every case against raises_when and, unless manual, against the scanned guard."""
    e = r.entry
    assert e is not None and e.check is not None
    check = e.check
    problems: list[Located] = []
    guard: Optional[ast.expr] = None
    if check.source_check != "manual":
        try:
            guard = scanned_guard(r, check)
        except (SyntaxError, ExprError) as err:
            problems.append(Located(e.path, check.line, f"the scanned guard cannot be read: {err}"))
        except RecursionError:
            problems.append(Located(e.path, check.line, "the scanned guard cannot be read: nested too deeply once "
                                                        "its locals are substituted"))
    for case in check.cases:
        values = case_values(check, case.inputs)
        try:
            got = bool(evaluate(check.raises_when, values))
        except MissingInput as err:
            problems.append(Located(e.path, case.line, f"case {err.message} (give it, or it needs a vocabulary default)"))
            continue
        except ExprError as err:
            problems.append(Located(e.path, case.line, f"raises_when fails on this case: {err.message}"))
            continue
        if got != case.raises:
            problems.append(Located(e.path, case.line, f"case says raises: {str(case.raises).lower()}, "
                                                        f"but raises_when gives {str(got).lower()}"))
        if check.reached_when is not None:
            try:
                reached = bool(evaluate(check.reached_when, values))
            except ExprError as err:
                problems.append(Located(e.path, case.line, f"reached_when fails on this case: {err.message}"))
                continue
            if got and not reached:
                problems.append(Located(e.path, case.line, "raises_when is true where reached_when is false: "
                                                            "vLLM does not run the guard there"))
            if not reached:
                continue  # vLLM does not run the guard's function: nothing to compare with it
        if guard is not None:
            try:
                by_source = bool(evaluate(guard, values))
            except ExprError as err:
                why = (f"reads {err.name!r}, which no binding or input covers" if isinstance(err, MissingInput)
                       else f"`{guard_site(r).fact.guard}` cannot be evaluated ({err.message})")
                problems.append(Located(e.path, check.line, f"vLLM's guard {why}: bind it in source_bindings, or set "
                                                            f"source_check: manual with a reason"))
                guard = None
                continue
            if by_source != case.raises:
                problems.append(Located(e.path, case.line, f"vLLM's own guard gives {str(by_source).lower()} for this case, "
                                                            f"the case says {str(case.raises).lower()}"))
    return problems


def _failed_check(failed: NotRun, r: Record, side: str) -> Located:
    """A check that cannot be evaluated on an example fix: located on the fix when it is the
    entry's own check, else on the other entry's condition."""
    e, other = r.entry, failed.record.entry
    assert e is not None and other is not None
    if failed.record.id == r.id:
        return Located(e.path, e.line_of("example_fix", side), f"example_fix.{side}: raises_when fails: {failed.error or failed.reason}")
    return Located(other.path, other.line_of("check", "raises_when"),
                   f"raises_when fails on the example fix of {e.path}: {failed.error or failed.reason}")


def verify_example_fix(r: Record, records: Sequence[Record], config: Optional[ConfigModel] = None) -> list[Located]:
    """`before` must predict this error, `after` must predict no error at all (as `kb check` does:
    curated and derived checks, kb/checks/launch_check.py); neither may be
    refused by vLLM's argument parser (kb/checks/cli_parse.py) or break a config field's
    constraints (kb/checks/order.py): vLLM stops there, before this check."""
    e = r.entry
    assert e is not None and e.example_fix is not None
    fix = e.example_fix
    if fix.language != "shell":
        return [Located(e.path, e.line_of("example_fix"), "an entry with a check needs a shell example fix (a `vllm "
                                                          "serve` command) so that kb check can run it")]
    return [_failed_check(failed, r, side) if failed is not None else Located(e.path, e.line_of("example_fix", side),
                                                                              message)
            for side, message, failed in _fix_findings(r, fix, records, config)]


def fix_problems(r: Record, fix: ExampleFix, records: Sequence[Record], config: Optional[ConfigModel] = None,
                 derived: Optional[DerivedIndex] = None) -> list[str]:
    """What `verify_example_fix` finds wrong with an example fix that no entry holds (a fix kb
    derives, kb/derived/fix.py): the same machinery, the problems as text. `derived`: the derived
    checks of `records`' sites, or of more sites (those of other records are not run)."""
    return [message if failed is None else f"example_fix.{side}: {failed.record.id}: {failed.error or failed.reason}"
            for side, message, failed in _fix_findings(r, fix, records, config, derived)]


def _fix_findings(r: Record, fix: ExampleFix, records: Sequence[Record], config: Optional[ConfigModel],
                  derived: Optional[DerivedIndex] = None) -> list[tuple[str, str, Optional[NotRun]]]:
    """(side, problem, the check that could not run) of each problem of a shell example fix."""
    problems: list[tuple[str, str, Optional[NotRun]]] = []
    for side, text, request in (("before", fix.before, fix.request_before), ("after", fix.after, fix.request_after)):
        words = command_words(text)
        if config is not None and has_parser(config):
            parsed = parse_command(config, serve_words(words))
            if parsed.error is not None:
                problems.append((side, f"example_fix.{side}: vLLM's parser refuses it: {parsed.error.printed}", None))
            else:
                for failure in validation_failures(config, parsed.values, parsed.given):
                    problems.append((side, f"example_fix.{side}: vLLM cannot build {failure.config_class}: "
                                     + " / ".join(f"{f.flag}: {f.msg}" for f in failure.errors), None))
        launch = parse_launch(words, fix.model_config or None, fix.hardware or None)
        for p in launch.problems:
            problems.append((side, f"example_fix.{side}: {p}", None))
        # as `kb check` runs it: the derived checks and the values vLLM computes too, where the
        # release's parser is known; else the curated checks alone
        outcome = check_one(records, config, words, ConfigFile("config.json", dict(fix.model_config or {})),
                            dict(fix.hardware or {}), with_valid=False, derived=derived, request=request) \
            if config is not None and has_parser(config) \
            else predict(records, launch)
        problems += [(side, "", n) for n in outcome.not_run]
        ids = [p.record.id for p in outcome.predicted]
        if outcome.parse_error is not None and outcome.parse_error.raised:
            ids.append(outcome.parse_error.raised)  # raised while vLLM's parser builds a config from a JSON value
        # with the GPU's memory, as `kb check` then also runs `kb fit`: the memory errors
        memory = _fit_ids(records, config, words, fix.model_config, fix.hardware) if _memory_error(r) else []
        ids += [i for i in memory if i not in ids]
        if side == "before" and r.id not in ids and all(n.record.id != r.id for n in outcome.not_run):
            missing = next((s.missing for s in outcome.skipped if s.record.id == r.id), ())
            why = f" (missing inputs: {', '.join(missing)})" if missing else ""
            problems.append((side, f"example_fix.before does not predict this error{why}", None))
        if side == "after" and ids:
            problems.append((side, "example_fix.after still predicts: " + "; ".join(
                [f"{p.record.id} ({p.message})" for p in outcome.predicted] + [f"{i} (kb fit)" for i in memory]), None))
    return problems


def _memory_error(r: Record) -> bool:
    """Whether the error is one of the memory errors `kb fit` predicts."""
    from kb.fit.launch import fit_error_key

    return fit_error_key(r.template) is not None


def _fit_ids(records: Sequence[Record], config: Optional[ConfigModel], words: Sequence[str],
             model_config: Optional[Mapping[str, Any]], hardware: Optional[Mapping[str, Any]]) -> list[str]:
    """The memory errors `kb fit` predicts for the launch (their ids), when the example gives the
    GPU's memory and the release's parser is known."""
    from kb.fit.launch import fit_one

    if config is None or not has_parser(config) or not hardware or "gpu_memory_gib" not in hardware:
        return []
    try:
        report = fit_one(records, config, words, ConfigFile("config.json", dict(model_config or {})), dict(hardware))
    except UsageError:
        return []  # the example lacks what the fit needs (the GPU, the model's length): it proves nothing
    return [err.id for err in report.errors if err.id is not None]
