"""When a launch does not fit, the smallest change of one flag with which it does, each proved by
kb fit's own arithmetic: the changed command is sized again by fit_one (vLLM's parser, the values it
computes, the release's defaults, the memory arithmetic), and so is the next value towards the
launch's own (the proof that no nearer value fits).

- `--tensor-parallel-size`: the smallest that fits among the values kb check tries for a count
  (kb/checks/valid.py flag_candidates, within the flag's constraints), valid for the model: no
  derived check reading the flag (vLLM's guards: `num_attention_heads` divisible by it, ...)
  raises that did not before, the KV heads split or replicated evenly (QKVParallelLinear), the
  MLP split evenly (MergedColumnParallelLinear), at most `--gpu-count` GPUs with the pipeline;
- `--max-model-len`: the largest below the launch's that fits, when the KV cache is the problem;
- `--gpu-memory-utilization`: the nearest hundredth within the flag's constraints (vLLM's
  `gt=0, le=1` on CacheConfig) that fits: the smallest above when the KV cache is short, the
  largest below when other processes hold the memory ("Free memory on device")."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

from kb.checks.candidates import flag_candidates
from kb.checks.cli_parse import parse_command
from kb.checks.compiled import DerivedIndex
from kb.checks.computed import Hardware
from kb.checks.facts import facts_of, run
from kb.checks.launch import ConfigFile, serve_words
from kb.configmodel import ConfigModel
from kb.errors import UsageError
from kb.fit.launch import FitReport, Suggestion, Tried, fit_one, memory_records
from kb.fit.shape import Shape, shape_of
from kb.model import Record

KV_ERRORS = ("no-memory", "max-seq-len", "auto-fit")  # the KV cache is short: a shorter max_model_len helps
MAX_TRIES = 100  # values sized per flag (a hundredth of utilization: at most 100)


def outcome(report: FitReport) -> str:
    if report.parse_error is not None:
        return f"invalid: {report.parse_error.printed}"
    return report.errors[0].key if report.errors else "fits"


def changed_argv(argv: Sequence[str], options: Sequence[str], value: str) -> tuple[tuple[str, ...], tuple[int, int]]:
    """The command with the flag's last occurrence set to `value` (argparse takes the last), or the
    flag added at the end, and the span of words changed."""
    words = list(argv)
    for i in range(len(words) - 1, -1, -1):
        word = words[i]
        for option in options:
            if word == option and i + 1 < len(words):
                words[i + 1] = value
                return tuple(words), (i, i + 2)
            if word.startswith(option + "="):
                words[i] = f"{option}={value}"
                return tuple(words), (i, i + 1)
    return (*words, options[0], value), (len(words), len(words) + 2)


class Sizer:
    """Sizes changed launches as kb fit sizes the given one."""

    def __init__(self, records: Sequence[Record], model: ConfigModel, derived: Optional[DerivedIndex],
                 argv: Sequence[str], config: ConfigFile, hardware: Mapping[str, Any], checkpoint: Optional[float]):
        self.records, self.model, self.derived = records, model, derived
        self.argv, self.config, self.hardware, self.checkpoint = tuple(argv), config, hardware, checkpoint
        self.templates = {r.id: r.template for r in records}
        self.memory = memory_records(records)

    def options(self, dest: str) -> tuple[str, ...]:
        """The flag's options, the one the launch writes first (else its name)."""
        flag = next(f for f in self.model.flags if f.dest == dest)
        written = [o for o in flag.options if any(w == o or w.startswith(o + "=") for w in self.argv)]
        return tuple(dict.fromkeys([*written[-1:], flag.name, *flag.options]))

    def size(self, dest: str, value: Any) -> tuple[tuple[str, ...], tuple[int, int], Optional[FitReport], str]:
        argv, span = changed_argv(self.argv, self.options(dest), shown(value))
        try:
            report = fit_one(self.records, self.model, argv, self.config, self.hardware, self.checkpoint, self.memory)
        except UsageError as e:
            return argv, span, None, f"invalid: {e}"
        return argv, span, report, outcome(report)

    def attempt(self, dest: str, old: Any, value: Any, tried: list[Tried]) -> Optional[Suggestion]:
        """The suggestion when the launch fits with `value`; else None, and `tried` gets its outcome."""
        argv, span, report, said = self.size(dest, value)
        if report is None or report.fit is None or said != "fits":
            tried.append(Tried(value, said))
            return None
        return Suggestion(argv[span[0]].split("=")[0], dest, old, value, argv, span, report.fit, tuple(tried))

    def parsed(self, dest: str, value: Any) -> Mapping[str, Any]:
        argv, _ = changed_argv(self.argv, self.options(dest), shown(value))
        return parse_command(self.model, serve_words(argv)).values


def shown(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def suggestions(report: FitReport, sizer: Sizer) -> tuple[Suggestion, ...]:
    """The smallest changes that fit, for a launch that does not (none when it fits)."""
    if report.fit is None or not report.errors:
        return ()
    first = report.errors[0].key
    found = [smallest_tp(report, sizer)]
    if first in KV_ERRORS:
        found.append(largest_max_model_len(report, sizer))
    if first in (*KV_ERRORS, "free-memory"):
        found.append(nearest_utilization(report, sizer, down=first == "free-memory"))
    return tuple(s for s in found if s is not None)


def tp_problem(sizer: Sizer, shape: Shape, tp: int, before: set[str]) -> Optional[str]:
    """Why vLLM refuses this tensor-parallel size for the model (None: kb knows no reason)."""
    parsed = sizer.parsed("tensor_parallel_size", tp)
    pp = parsed.get("pipeline_parallel_size") or 1
    count = sizer.hardware.get("gpu_count")
    if isinstance(count, int) and not isinstance(count, bool) and count > 0 and tp * pp > count:
        return f"{tp} x {pp} pipeline stages need more than --gpu-count {count} GPUs"
    if sizer.derived is not None:
        facts = facts_of(sizer.model, parsed, sizer.config.data, hardware=Hardware.of(sizer.hardware))
        for check in sizer.derived.checks:
            if check.record_id in before or not any(r.key == "tensor_parallel_size" for r in check.refs):
                continue
            verdict = run(check, facts, sizer.templates.get(check.record_id, ""))
            if verdict.raises:
                return verdict.message or f"vLLM's check {check.record_id} ({check.file}:{check.line}) raises"
    if shape.heads % tp:  # vLLM's own check (ModelConfig.verify_with_parallel_config), when its index lacks it
        return f"num_attention_heads ({shape.heads}) is not divisible by {tp}"
    if not shape.mla and (shape.kv_heads % tp if tp < shape.kv_heads else tp % shape.kv_heads):
        return f"the {shape.kv_heads} KV heads cannot be split or replicated evenly over {tp} GPUs (QKVParallelLinear)"
    if not shape.experts and shape.intermediate % tp:
        return f"intermediate_size ({shape.intermediate}) is not divisible by {tp} (MergedColumnParallelLinear)"
    return None


def raised_before(sizer: Sizer) -> set[str]:
    """The derived checks reading the tensor-parallel size that raise for the launch as given: a
    changed size is not blamed for them."""
    if sizer.derived is None:
        return set()
    parsed = parse_command(sizer.model, serve_words(sizer.argv)).values
    facts = facts_of(sizer.model, parsed, sizer.config.data, hardware=Hardware.of(sizer.hardware))
    return {c.record_id for c in sizer.derived.checks if any(r.key == "tensor_parallel_size" for r in c.refs)
            and run(c, facts, sizer.templates.get(c.record_id, "")).raises}


def smallest_tp(report: FitReport, sizer: Sizer) -> Optional[Suggestion]:
    flag = sizer.model.flag("--tensor-parallel-size")
    if flag is None:
        return None
    shape = shape_of(sizer.config.data, sizer.config.path, sizer.config.where)
    parsed = parse_command(sizer.model, serve_words(sizer.argv)).values
    old = parsed.get("tensor_parallel_size") or 1
    count = sizer.hardware.get("gpu_count")
    given = {"num_attention_heads": shape.heads, **({"gpu_count": count} if isinstance(count, int) else {})}
    before = raised_before(sizer)
    tried: list[Tried] = []
    for tp in flag_candidates(flag, given)[:MAX_TRIES]:
        if tp == old:
            tried.append(Tried(tp, outcome(report)))
            continue
        problem = tp_problem(sizer, shape, tp, before)
        if problem is not None:
            tried.append(Tried(tp, f"invalid: {problem}"))
            continue
        found = sizer.attempt("tensor_parallel_size", old, tp, tried)
        if found is not None:
            return found
    return None


def _largest(low: int, high: int, fits: Callable[[int], bool]) -> Optional[int]:
    """The largest n in [low, high] that fits, by bisection (fitting is monotone: shorter fits)."""
    if high < low or not fits(low):
        return None
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return low


def largest_max_model_len(report: FitReport, sizer: Sizer) -> Optional[Suggestion]:
    assert report.fit is not None
    old = report.fit.max_model_len
    seen: dict[int, str] = {}

    def fits(n: int) -> bool:
        if n not in seen:
            seen[n] = sizer.size("max_model_len", n)[3]
        return seen[n] == "fits"

    hint = int(report.fit.max_model_len_fits.value)  # kb's own estimate: usually the answer, proved below
    if 0 < hint < old and fits(hint) and (hint + 1 >= old or not fits(hint + 1)):
        best: Optional[int] = hint
    else:
        best = _largest(1, old - 1, fits)
    if best is None:
        return None
    proof = [Tried(best + 1, seen[best + 1] if best + 1 in seen else outcome(report))]
    return sizer.attempt("max_model_len", old, best, proof)


def within(value: float, constraints: Mapping[str, Any]) -> bool:
    """Whether pydantic's constraints (`gt`, `ge`, `lt`, `le`, as the flag's field writes them) take the value."""
    tests = {"gt": value.__gt__, "ge": value.__ge__, "lt": value.__lt__, "le": value.__le__}
    return all(tests[k](v) for k, v in constraints.items()
               if k in tests and isinstance(v, (int, float)) and not isinstance(v, bool))


def nearest_utilization(report: FitReport, sizer: Sizer, down: bool) -> Optional[Suggestion]:
    """The nearest hundredth that fits, above the launch's share (below when `down`), within the
    flag's constraints as the release's source writes them."""
    flag = sizer.model.flag("--gpu-memory-utilization")
    if flag is None:
        return None
    old = report.utilization
    grid = [n / 100 for n in range(1, 101) if within(n / 100, dict(flag.constraints))]
    candidates = sorted((u for u in grid if u < old - 1e-9), reverse=True) if down else \
        [u for u in grid if u > old + 1e-9]
    tried = [Tried(round(old, 4), outcome(report))]
    for u in candidates[:MAX_TRIES]:
        found = sizer.attempt("gpu_memory_utilization", old, u, tried)
        if found is not None:
            return found
    return None


def fit_and_suggest(records: Sequence[Record], model: ConfigModel, derived: Optional[DerivedIndex],
                    argv: Sequence[str], config: ConfigFile, hardware: Mapping[str, Any],
                    checkpoint: Optional[float] = None) -> FitReport:
    """kb fit: the launch sized (fit_one), and when it does not fit, the smallest changes that do."""
    from dataclasses import replace

    sizer = Sizer(records, model, derived, argv, config, hardware, checkpoint)
    report = fit_one(records, model, argv, config, hardware, checkpoint, sizer.memory)
    if report.fit is None or not report.errors:
        return report
    return replace(report, suggestions=suggestions(report, sizer))
