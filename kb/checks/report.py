"""`kb check` output: text for people, JSON for programs. Pure functions."""

from __future__ import annotations

import json
from typing import Any, Optional

from kb.checks.modelconfig import ConfigSource
from kb.checks.needs import (
    CONFIG,
    HARDWARE,
    METAVARS,
    OTHER,
    STARTUP,
    Need,
    count_by_source,
    need_groups,
    needs_of,
    sources_of,
)
from kb.checks.order import ValidationFailure
from kb.checks.predict import Outcome, Prediction
from kb.urls import error_url


def _first(outcome: Outcome) -> Optional[dict[str, Any]]:
    """What vLLM stops at: the parser's error, else the first config it cannot build or check."""
    if outcome.parse_error is not None:
        return {"kind": "parse", "message": outcome.parse_error.printed}
    events = outcome.in_order()
    if not events:
        return None
    e = events[0]
    if isinstance(e, ValidationFailure):
        return {"kind": "validation", "class": e.config_class, "message": e.printed}
    return {"kind": "check", "id": e.record.id, "message": e.message}


def outcome_json(outcome: Outcome, site_url: Optional[str] = None, fit: Optional[dict[str, Any]] = None) -> str:
    """`fit`: kb fit's figures for the launch (kb/fit/report.py fit_dict), when the GPU's memory is known."""
    events = outcome.in_order()
    rank = {id(e): n for n, e in enumerate(events, 1)}
    predicted = [e for e in events if isinstance(e, Prediction)]
    data: dict[str, Any] = {
        "predicted": [
            {"id": p.record.id, "class": p.record.exception_class, "file": p.record.file, "line": p.record.line,
             "function": p.record.sites[0].fact.qualname, "message": p.message, "template": p.record.template,
             "firstSolution": p.record.entry.solutions[0] if p.record.entry and p.record.entry.solutions else None,
             "url": error_url(p.record.id, site_url, outcome.release), "order": rank[id(p)],
             "validValues": outcome.valid.get(p.record.id, {}),
             "source": "curated" if p.record.entry is not None and p.record.entry.check is not None else "derived"}
            for p in predicted],
        "validationErrors": [
            {"class": v.config_class, "builtAt": f"vllm/engine/arg_utils.py:{v.built_at}",
             "raisedAt": f"vllm/engine/arg_utils.py:{v.made_at or v.built_at}", "message": v.printed,
             "order": rank[id(v)],
             "errors": [{"field": f.field, "flag": f.flag, "type": f.kind, "msg": f.msg, "value": f.value}
                        for f in v.errors]}
            for v in events if isinstance(v, ValidationFailure)],
        "first": _first(outcome),
        "skipped": [{"id": s.record.id, "title": s.record.title, "url": error_url(s.record.id, site_url, outcome.release),
                     "missing": list(s.missing), "needs": [n.to_json() for n in needs_of(s)],
                     "sources": list(sources_of(s))} for s in outcome.skipped],
        "judged": outcome.judged,
        "configJson": outcome.config.to_json() if outcome.config is not None else None,
        "unknown": [{"id": s.record.id, "missing": list(s.missing)} for s in outcome.unknown],
        "ignoredFlags": list(outcome.launch.ignored_flags),
        "problems": list(outcome.launch.problems),
        "notRun": [{"id": n.record.id, "reason": n.reason} for n in outcome.not_run],
        "model": outcome.launch.model,
        "parseError": None if outcome.parse_error is None else {
            "stage": outcome.parse_error.stage, "message": outcome.parse_error.printed,
            "option": outcome.parse_error.option, "exact": outcome.parse_error.exact},
    }
    if fit is not None:
        data["fit"] = fit
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def outcome_text(outcome: Outcome, site_url: Optional[str] = None) -> str:
    lines: list[str] = []
    events = outcome.in_order()
    n = len(events)
    stop = outcome.parse_error
    if stop is not None:
        lines += ["vLLM stops while reading the command line, before it builds any config:",
                  "    " + stop.printed.replace("\n", "\n    ")]
        if not stop.exact:
            lines.append("    (vLLM's own words differ: they name a function or pydantic's report; kb predicts "
                         "the error, not its exact text)")
        if n:
            lines += ["", f"After you fix it, {n} error{'s' if n > 1 else ''} predicted for this launch:"]
    elif n == 1:
        lines.append("1 error predicted for this launch:")
    elif n:
        lines.append(f"{n} errors predicted for this launch, in the order vLLM meets them:")
    elif outcome.skipped:
        lines += not_judged(outcome, site_url)
    else:
        lines.append("No error predicted by the checks whose inputs are known.")
    for i, e in enumerate(events):
        mark = "" if n == 1 else "  (vLLM raises this one first)" if i == 0 and stop is None else \
            "  (after you fix the first)"
        if isinstance(e, ValidationFailure):
            lines += ["", f"  ValidationError  building {e.config_class} (vllm/engine/arg_utils.py:"
                          f"{e.made_at or e.built_at}){mark}"]
            lines += [f"    {line}" for line in e.printed.splitlines()]
            continue
        r = e.record
        lines += ["", f"  {r.id}  {r.exception_class}  {r.file}:{r.line}  ({r.sites[0].fact.qualname}){mark}",
                  f"    {e.message}"]
        if r.entry is not None and r.entry.solutions:
            lines.append(f"    First fix: {r.entry.solutions[0]}")
        if r.entry is None or r.entry.check is None:
            lines.append("    (predicted by vLLM's own condition, which kb derives from its source; no curated check)")
        for flag, values in outcome.valid.get(r.id, {}).items():
            lines.append(f"    Valid {flag} here (the rest unchanged, every check of it passes): "
                         + ", ".join(str(v) for v in values))
        lines.append(f"    {error_url(r.id, site_url, outcome.release)}")
    if n > 1:
        lines += ["", "  vLLM stops at the first error; the next appears once it is fixed."]
    if outcome.skipped and (n or stop is not None):
        lines += ["", *not_judged(outcome, site_url)]
    if outcome.unknown:
        lines += ["", f"{len(outcome.unknown)} check(s) derived from vLLM's guards are unknown for this launch: they "
                      "need a value kb cannot know before launch (`--json` lists each and what it needs)."]
    if outcome.not_run:
        lines += ["", f"{len(outcome.not_run)} check(s) not run:"]
        lines += [f"  {n.record.id}: {n.reason}" for n in outcome.not_run]
    if outcome.launch.ignored_flags:
        lines += ["", "Flags no check reads (ignored): " + " ".join(outcome.launch.ignored_flags)]
    if outcome.launch.problems:
        lines += ["", "Bad input (the checks that need it did not run):"]
        lines += [f"  {problem}" for problem in outcome.launch.problems]
    read = config_read(outcome.config)
    if read:
        lines += ["", read]
    return "\n".join(lines) + "\n"


_NAMES = {CONFIG: "the model's config.json", HARDWARE: "the GPU", STARTUP: "values vLLM computes when it starts",
          OTHER: "other inputs"}
_GPU_FACTS = {"gpu_count": "the GPU count", "compute_capability": "the GPU's compute capability",
              "gpu_memory_gib": "the GPU's memory"}


def not_judged(outcome: Outcome, site_url: Optional[str]) -> list[str]:
    """The checks that could raise but did not run for inputs kb was not given, by what gives them:
    first how many each source would let run, then each check by its title."""
    skipped = outcome.skipped
    k = len(skipped)
    lines = [f"Not judged: {k} check{'s' if k > 1 else ''} that could raise an error for this launch did not run: "
             f"kb lacks inputs {'it needs' if k == 1 else 'they need'}."]
    if not outcome.errors:
        lines.append("The other checks predict no error; that is not an all-clear.")
    config_given = outcome.config is not None and outcome.config.path is not None
    for source, checks in count_by_source(skipped).items():
        needs = [need for s in checks for need in needs_of(s) if need.source == source]
        verb = "needs" if len(checks) == 1 else "need"
        lines.append(f"  {len(checks)} {verb} {_what(source, needs, config_given)}: {_how(source, needs, config_given)}")
        looked = _looked(outcome.config) if source == CONFIG else ""
        if looked:
            lines.append(f"      ({looked})")
    for group in need_groups(skipped):
        lines += ["", "Checks that need " + " and ".join(_NAMES[x] for x in group.sources) + ":"]
        for s in group.checks:
            lines.append(f"  {s.record.id}  {s.record.title}  (needs {', '.join(s.missing)})")
            if site_url:
                lines.append(f"      {error_url(s.record.id, site_url, outcome.release)}")
    return lines


def _what(source: str, needs: list[Need], config_given: bool) -> str:
    names = list(dict.fromkeys(n.input for n in needs))
    if source == CONFIG:
        return f"keys the config.json read does not give ({', '.join(names)})" if config_given else _NAMES[CONFIG]
    if source == HARDWARE:
        return " and ".join(_GPU_FACTS.get(x, x) for x in names)
    return f"{_NAMES[source]} ({', '.join(names)})"


def _how(source: str, needs: list[Need], config_given: bool) -> str:
    if source == CONFIG:
        if config_given:
            return "pass a config.json that gives them with --model-config FILE_OR_DIR"
        return ("pass --model-config FILE_OR_DIR (or download the model so kb finds it in the Hugging Face "
                "cache)")
    options = list(dict.fromkeys(n.options for n in needs))
    if source == HARDWARE:
        return "pass " + "; ".join(_option(o[0]) + (f" (or {_option(o[1])})" if len(o) > 1 else "") for o in options)
    if source == STARTUP:
        return ("give " + ", ".join(_option(o[0]) for o in options) + " in the command (or --gpu NAME with the "
                "model's config.json: kb computes vLLM's default)")
    return "kb has no option for them"


def _option(name: str) -> str:
    return f"{name} {METAVARS.get(name, 'N')}"


def _looked(config: Optional[ConfigSource]) -> str:
    """Where kb looked for config.json and did not find it."""
    if config is None or config.how != "none" or not config.model:
        return ""
    if config.cache is None:
        return f"{config.model} is a local path without config.json"
    at = f" at revision {config.revision}" if config.revision else ""
    return f"kb looked for {config.model}{at} in the Hugging Face cache, {config.cache}: not there"


def config_read(config: Optional[ConfigSource]) -> str:
    """Which config.json was read, and how kb found it."""
    if config is None or config.path is None:
        return ""
    how = {"given": "--model-config", "folder": "the model's folder", "hf-cache": "the Hugging Face cache"}
    if config.how == "given":
        return f"config.json: {config.path} (--model-config)"
    return f"config.json: from {how.get(config.how, config.how)}, {config.path}"
