"""A derived example fix: a `vllm serve` launch for which `kb check` predicts exactly this error
first, and the smallest change after which it predicts no error at all. Found by kb from the check
it derives from vLLM's guard (kb/checks/derive.py) and proved as a curated example fix is proved
(kb/checks/verify.py `fix_problems`: vLLM's parser, the configs' constraints, `kb check` on both
sides).

The search: vLLM's condition is evaluated three-valued (kb/checks/evaluate.py `holds`) with only
the inputs chosen so far; the input it needs next is the one tried next, its default first
(kb/derived/domains.py). A launch that makes the condition hold is built and run through the whole
`kb check`. Bounded (MAX_STEPS evaluations, MAX_TRIALS runs of `kb check`), deterministic.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Optional

from kb.checks.compiled import PLATFORMS, Derived, DerivedIndex
from kb.checks.facts import Facts, constants_of, facts_of, reads_request, run
from kb.checks.launch import ConfigFile
from kb.checks.launch_check import check_one
from kb.checks.predict import Outcome, Prediction
from kb.configmodel import ConfigModel, Flag
from kb.derived.domains import NOT_GIVEN, Pool, constant_pool, domains
from kb.errors import OVER_BUDGET, ExprError, MissingInput, WorkBudgetExceeded
from kb.model import ExampleFix, Record

MODEL = "MODEL"  # the model as the example names it: any model of the shape config.json gives
MAX_STEPS = 4000  # evaluations of the condition in one search
MAX_SOLUTIONS = 12  # launches that raise, run through `kb check` before giving up
MAX_AFTER = 40  # changes tried for the fixed launch
# the GPU and config.json an example assumes when vLLM's condition reads a value it computes from them
GPU = {"gpu_name": "NVIDIA H100 80GB HBM3", "gpu_memory_gib": 79.19, "compute_capability": 9.0}
BASE_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
               "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
               "max_position_embeddings": 8192, "vocab_size": 128256}


@dataclass(frozen=True)
class Draft:
    """A launch: the flags given (dest -> value, in order) and config.json."""

    flags: tuple[tuple[str, Any], ...]
    config: tuple[tuple[str, Any], ...]
    hardware: tuple[tuple[str, Any], ...] = ()
    request: Optional[tuple[tuple[str, Any], ...]] = None  # a request's sampling parameters (request errors)

    def with_flag(self, dest: str, value: Any) -> Draft:
        if value is NOT_GIVEN:
            return replace(self, flags=tuple((d, v) for d, v in self.flags if d != dest))
        if any(d == dest for d, _ in self.flags):
            return replace(self, flags=tuple((d, value if d == dest else v) for d, v in self.flags))
        return replace(self, flags=(*self.flags, (dest, value)))

    def with_key(self, key: str, value: Any) -> Draft:
        rest = tuple((k, v) for k, v in self.config if k != key)
        return replace(self, config=rest if value is NOT_GIVEN else (*rest, (key, value)))

    def with_field(self, name: str, value: Any) -> Draft:
        """The request with a sampling parameter set (NOT_GIVEN: left out)."""
        rest = tuple((k, v) for k, v in self.request or () if k != name)
        return replace(self, request=rest if value is NOT_GIVEN else (*rest, (name, value)))

    @property
    def request_values(self) -> Optional[dict[str, Any]]:
        return dict(self.request) if self.request is not None else None


@dataclass(frozen=True)
class Found:
    """What the search found for one error: the proved fix, its valid values, or why there is none."""

    fix: Optional[ExampleFix] = None
    change: str = ""  # the change, in words (Markdown)
    valid: dict[str, list[Any]] = field(default_factory=dict)  # flag -> values with which no check reading it raises
    reason: str = ""  # why there is no fix


class _Search:
    def __init__(self, record: Record, check: Derived, records: Sequence[Record], model: ConfigModel,
                 index: DerivedIndex, pool: Optional[Pool] = None) -> None:
        self.record, self.check, self.records, self.model, self.index = record, check, records, model, index
        self.by_dest = {f.dest: f for f in model.flags}
        probe = facts_of(model, {}, {})
        self.domains = domains(check, model, probe.key_defaults, pool)
        self.fixed: dict[str, Any] = constants_of(check)
        self.unknown: list[str] = [r.shown for r in check.refs if r.kind == "value" and r.name not in self.fixed]
        for r in check.refs:
            if r.kind == "platform" and r.key in PLATFORMS["cuda"]:
                self.fixed[r.name] = PLATFORMS["cuda"][r.key]
            elif r.kind == "env" and r.key in probe.env:
                self.fixed[r.name] = probe.env[r.key]
        self.computed = any(r.kind == "computed" for r in check.refs)
        self.request = reads_request(check)  # a request's check: the launch stays plain, the request changes
        if self.request:  # served by a real model (BASE_CONFIG): its config.json is not what the fix changes
            for r in check.refs:
                if r.kind == "config-json" and r.key in BASE_CONFIG:
                    self.fixed[r.name] = BASE_CONFIG[r.key]
                    self.domains.pop(r.name, None)
        self.steps = 0
        self.needs: list[str] = []  # what the condition asked for that a launch cannot give
        self.dropped = False  # the condition exceeds the command's work budget: the search stops

    # --- the launch that raises --------------------------------------------------------------------
    def raising(self) -> Iterator[dict[str, Any]]:
        """Assignments of the refs under which vLLM's condition holds, nearest the defaults first."""
        yield from self._dfs({})

    def _dfs(self, chosen: dict[str, Any]) -> Iterator[dict[str, Any]]:
        if self.steps >= MAX_STEPS:
            return
        self.steps += 1
        env = dict(self.fixed)
        for name, value in chosen.items():
            if value is NOT_GIVEN:
                if self.domains[name].default is not NOT_GIVEN:
                    env[name] = self.domains[name].default
            else:
                env[name] = value
        if self.computed:
            env.update(self._computed(chosen))
        try:
            holds = _holds(self.check.expr, env)
        except MissingInput as e:
            d = self.domains.get(e.name) or self.domains.get(e.name + ":flag")
            if d is not None and d.ref.name != e.name:
                if d.ref.name in chosen:  # what vLLM computes stays unknown with the flag as chosen
                    self.needs.append(next((r.shown for r in self.check.refs if r.name == e.name), e.name))
                    return
                for value in d.values:
                    yield from self._dfs({**chosen, d.ref.name: value})
                return
            if d is None or e.name in chosen:
                ref = next((r for r in self.check.refs if r.name == e.name), None)
                self.needs.append(ref.shown if ref is not None else e.name)
                return
            for value in d.values:
                if value is NOT_GIVEN and d.default is NOT_GIVEN:
                    continue
                yield from self._dfs({**chosen, e.name: value})
            return
        except WorkBudgetExceeded:
            self.dropped, self.steps = True, MAX_STEPS
            return
        except ExprError:
            return
        if holds:
            yield chosen

    def _computed(self, chosen: Mapping[str, Any]) -> dict[str, Any]:
        draft = self.draft(chosen)
        if draft is None:
            return {}
        facts = self.facts(draft)
        # a value of the same name as a flag: read once the flag is chosen (given or left out)
        return {r.name: facts.computed.values[r.key] for r in self.check.refs
                if r.kind == "computed" and r.key in facts.computed.values
                and (r.name + ":flag" not in self.domains or r.name + ":flag" in chosen)}

    def draft(self, chosen: Mapping[str, Any]) -> Optional[Draft]:
        """The launch of an assignment; None when two of its values contradict each other."""
        flags: dict[str, Any] = {}
        keys: dict[str, dict[str, Any]] = {}
        given: dict[str, bool] = {}
        config: dict[str, Any] = dict(BASE_CONFIG) if self.computed or self.request else {}
        request: dict[str, Any] = {}
        for name, value in chosen.items():
            d = self.domains[name]
            r = d.ref
            if r.kind in ("flag", "flag-given"):
                if value is not NOT_GIVEN and value != self._default(r.key):
                    if r.key in flags and flags[r.key] != value:
                        return None
                    flags[r.key] = value
            elif r.kind in ("flag-key", "flag-key-given"):
                dest, _, key = r.key.partition(".")
                keys.setdefault(dest, {})
                if value is not NOT_GIVEN:
                    keys[dest][key] = value
            elif r.kind == "given":
                given[r.key] = bool(value)
            elif r.kind == "config-json" and value is not NOT_GIVEN:
                config[r.key] = value
            elif r.kind == "request" and value is not NOT_GIVEN and not _same(value, d.default):
                request[r.key] = value
        for dest, values in keys.items():
            if given.get(dest) is False:
                return None
            if dest in flags and not isinstance(flags[dest], dict):
                return None
            flags[dest] = {**(flags.get(dest) or {}), **values}
        for dest, yes in given.items():
            if yes and dest not in flags:
                flags[dest] = self._sample(dest)
                if flags[dest] is NOT_GIVEN:
                    return None
            if not yes and dest in flags:
                return None
        return Draft(tuple(flags.items()), tuple(config.items()), tuple(GPU.items()) if self.computed else (),
                     tuple(request.items()) if self.request else None)

    def _default(self, dest: str) -> Any:
        f = self.by_dest.get(dest)
        return f.default if f is not None and f.default_known and f.default_exact else NOT_GIVEN

    def _sample(self, dest: str) -> Any:
        """A value that gives the flag (the condition only asks whether it is given)."""
        f = self.by_dest.get(dest)
        if f is None or not f.options:
            return NOT_GIVEN
        d = next((d for d in self.domains.values() if d.ref.kind in ("flag", "flag-given") and d.ref.key == dest), None)
        values = [v for v in (d.values if d is not None else ()) if v is not NOT_GIVEN and v != self._default(dest)]
        if values:
            return values[0]
        if f.parses_into or isinstance(f.default, dict) or (f.value_type or f.type) in ("loads", "parse_dataclass"):
            return {}
        if f.action in ("store_true", "boolean"):
            return True
        return f.choices[0] if f.choices else NOT_GIVEN

    def facts(self, draft: Draft) -> Facts:
        return facts_of(self.model, dict(draft.flags), dict(draft.config), hardware=_hardware(draft),
                        request=draft.request_values)

    # --- kb check on a draft -----------------------------------------------------------------------
    def outcome(self, draft: Draft, valid: bool = False) -> Optional[Outcome]:
        words = launch_words(self.model, draft)
        if words is None:
            return None
        return check_one(self.records, self.model, words, ConfigFile("config.json", dict(draft.config)),
                         dict(draft.hardware) or None, with_valid=valid, derived=self.index, request=draft.request_values)

    def first(self, outcome: Outcome) -> bool:
        if outcome.parse_error is not None:  # raised while vLLM's parser reads a JSON value: first of all
            return outcome.parse_error.raised == self.record.id and not outcome.not_run
        if outcome.not_run:
            return False
        events = outcome.in_order()
        return bool(events) and isinstance(events[0], Prediction) and events[0].record.id == self.record.id

    def raises(self, draft: Draft) -> Optional[bool]:
        try:
            return run(self.check, self.facts(draft), "").raises
        except (ExprError, ValueError, TypeError):
            return None

    # --- the smallest change -----------------------------------------------------------------------
    def changes(self, before: Draft, valid: Mapping[str, list[Any]]) -> Iterator[tuple[int, str, Draft]]:
        """(preference, the change in words, the launch) for each single change, preferred first:
        another value of a flag given (its valid values first), another value of a key, a flag
        added, config.json changed; last, a switch turned off or a flag left out."""
        given = dict(before.flags)
        out: list[tuple[int, int, str, Draft]] = []
        n = 0
        sent = dict(before.request or ())
        told = " ".join(expr for _, expr in self.check.message)  # the values the message shows
        for d in self.domains.values():  # a request's field: another value, or left out (its default)
            if d.ref.kind != "request":
                continue
            name = d.ref.key
            shown = re.search(rf"\b{d.ref.name}\b", told) is not None  # the field the message is about first
            for v in d.values:
                if v is NOT_GIVEN:
                    if name in sent:
                        out.append((1, n, f"leave `{name}` out of the request, for its default", before.with_field(name, v)))
                elif not _same(v, sent.get(name, d.default)):
                    out.append((0 if shown else 1, n, f"set `{name}` to {_code(_json(v))} in the request",
                                before.with_field(name, v)))
                n += 1
        for dest, value in given.items():
            flag = self.by_dest[dest]
            if isinstance(value, dict):
                for d in self.domains.values():
                    sub_dest, _, key = d.ref.key.partition(".")
                    if d.ref.kind not in ("flag-key", "flag-key-given") or sub_dest != dest:
                        continue
                    for v in d.values:
                        if v is NOT_GIVEN and key in value:
                            rest = {k: x for k, x in value.items() if k != key}
                            out.append((5, n, f"leave `{key}` out of {_code(flag.name)}", before.with_flag(dest, rest)))
                        elif v is not NOT_GIVEN and value.get(key, NOT_GIVEN) != v:
                            out.append((1, n, f"set `{key}` in {_code(flag.name)} to {_value_text(v)}",
                                        before.with_flag(dest, {**value, key: v})))
                        n += 1
                continue
            switch = _switch(flag)
            tried = [*valid.get(flag.name, []), *self._values(dest)]
            for v in _distinct(tried):
                if v is NOT_GIVEN or _same(v, value):
                    continue
                rank = 4 if switch else 0
                text = (f"turn {_code(flag.name)} {'on' if v else 'off'}" if switch
                        else f"set {_code(flag.name)} to {_value_text(v)}")
                out.append((rank, n, text, before.with_flag(dest, v)))
                n += 1
            out.append((5, n, f"leave out {_code(flag.name)}", before.with_flag(dest, NOT_GIVEN)))
            n += 1
        for d in self.domains.values():
            r = d.ref
            if r.kind in ("flag", "flag-given") and r.key not in given:
                flag = self.by_dest[r.key]
                for v in d.values:
                    if v is NOT_GIVEN or _same(v, self._default(r.key)):
                        continue
                    text = f"add {_code(flag.name)}" if _switch(flag) and v is True else \
                        f"add {_code(flag.name)} {_value_text(v)}"
                    out.append((2, n, text, before.with_flag(r.key, v)))
                    n += 1
            elif r.kind == "config-json":
                now = dict(before.config).get(r.key, NOT_GIVEN)
                for v in d.values:
                    if not _same(v, now):
                        out.append((3, n, f"a model whose config.json has `{r.key}: {_json(v)}`",
                                    before.with_key(r.key, v)))
                        n += 1
        for rank, _, text, draft in sorted(out, key=lambda x: (x[0], x[1])):
            yield rank, text, draft

    def _values(self, dest: str) -> list[Any]:
        return [v for d in self.domains.values() if d.ref.key == dest and d.ref.kind in ("flag", "flag-given")
                for v in d.values]


def _holds(expr: str, env: Mapping[str, Any]) -> bool:
    from kb.checks.evaluate import holds

    return holds(expr, env)


def _hardware(draft: Draft) -> Optional[Any]:
    from kb.checks.computed import Hardware

    return Hardware.of(dict(draft.hardware)) if draft.hardware else None


def _switch(flag: Flag) -> bool:
    return flag.action in ("store_true", "store_false", "boolean") or flag.type == "bool"


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _distinct(values: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if not any(_same(v, o) for o in out):
            out.append(v)
    return out


def _code(text: str) -> str:
    from kb.records.present import code_span

    return code_span(text)


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _value_text(value: Any) -> str:
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
        return " ".join(_code(str(v)) for v in value) or "nothing"
    return _code(value if isinstance(value, str) else _json(value))


# --- words ------------------------------------------------------------------------------------------
def flag_words(flag: Flag, value: Any) -> Optional[list[str]]:
    """The words that give the flag this value, as vLLM's parser reads them; None when none do."""
    if not flag.options:
        return None
    name = flag.name
    if flag.action == "boolean":
        if value is True:
            return [name]
        negative = next((o for o in flag.options if o.startswith("--no-") or
                         (name.startswith("--enable-") and o == "--disable-" + name.removeprefix("--enable-"))), None)
        return [negative] if value is False and negative else None
    if flag.action == "store_true":
        return [name] if value is True else None
    if flag.action == "store_false":
        return [name] if value is False else None
    if flag.action not in ("store", "append") or value is None or (isinstance(value, bool) and flag.type not in (
            None, "str", "bool")):
        return None
    if isinstance(value, dict):
        return [name, _json(value)]
    if isinstance(value, list):
        if flag.nargs in ("+", "*"):
            return [name, *[str(v) for v in value]] if value or flag.nargs == "*" else None
        return [name, _json(value)]
    if isinstance(value, bool):
        return [name, "true" if value else "false"]
    return [name, str(value)]


def launch_words(model: ConfigModel, draft: Draft) -> Optional[list[str]]:
    """`vllm serve MODEL ...` for the draft; None when a value cannot be written as words."""
    by_dest = {f.dest: f for f in model.flags}
    words = ["vllm", "serve", MODEL]
    for dest, value in draft.flags:
        flag = by_dest.get(dest)
        found = flag_words(flag, value) if flag is not None else None
        if found is None:
            return None
        words += found
    return words


def command_text(words: Sequence[str]) -> str:
    return " ".join(shlex.quote(w) for w in words)


# --- the search ---------------------------------------------------------------------------------------
def find_fix(record: Record, records: Sequence[Record], model: ConfigModel, index: DerivedIndex,
             pool: Optional[Pool] = None) -> Found:
    """The derived example fix of a record with a derived check, proved; else why there is none."""
    from kb.checks.verify import fix_problems

    checks = [c for c in index.checks if c.record_id == record.id]
    if not checks:
        return Found(reason="no check kb derives from vLLM's guard")
    reasons: list[str] = []
    for check in checks:
        search = _Search(record, check, records, model, index, pool if pool is not None else constant_pool(index))
        found = _one(search, reasons)
        if found is None:
            continue
        before, after, text, valid = found
        fix = ExampleFix("shell", command_text(launch_words(model, before) or []),
                         command_text(launch_words(model, after) or []), dict(before.config), dict(before.hardware),
                         before.request_values, after.request_values)
        problems = fix_problems(record, fix, records, model, index)
        if problems:
            reasons.append("not proved: " + "; ".join(problems))
            continue
        return Found(fix, text, valid)
    return Found(reason=reasons[0] if reasons else "no launch found")


def _after(search: _Search, before: Draft, valid: Mapping[str, list[Any]]) -> Optional[tuple[Draft, str]]:
    """The first single change (preferred first) after which `kb check` predicts no error at all."""
    for n, (_, text, after) in enumerate(search.changes(before, valid)):
        if n >= MAX_AFTER:
            return None
        if search.raises(after) is not False:
            continue
        fixed = search.outcome(after)
        if fixed is not None and fixed.parse_error is None and not fixed.predicted and not fixed.validation \
                and not fixed.not_run and not _request_open(search, fixed, after):
            return after, text
    return None


def _request_open(search: _Search, outcome: Outcome, draft: Draft) -> bool:
    """A request check kb leaves undecided reads a field the request gives: vLLM may raise it."""
    if draft.request is None:
        return False
    sent = {k for k, _ in draft.request}
    undecided = {u.record.id for u in outcome.unknown}
    return any(c.record_id in undecided and any(r.kind == "request" and r.key in sent for r in c.refs)
               for c in search.index.checks)


def _one(search: _Search, reasons: list[str]) -> Optional[tuple[Draft, Draft, str, dict[str, list[Any]]]]:
    tried = 0
    other_first = undecided = no_change = ""
    for chosen in search.raising():
        draft = search.draft(chosen)
        if draft is None:
            continue
        verdict = search.raises(draft)
        if verdict is not True:
            if verdict is None:
                keys = [d.ref.shown[:60] for n, d in search.domains.items() if n in chosen and d.ref.kind.startswith("flag-key")]
                undecided = undecided or ("kb check cannot tell the value vLLM reads: " + ", ".join(keys) if keys else
                                          "kb check cannot decide it for the launches that raise it")
            continue
        outcome = search.outcome(draft, valid=True)
        tried += 1
        if outcome is None:
            continue
        if not search.first(outcome):
            events = outcome.in_order()
            if outcome.parse_error is not None:
                other_first = other_first or f"vLLM's parser refuses the launch first ({outcome.parse_error.message[:120]})"
            elif events and isinstance(events[0], Prediction):
                other_first = other_first or f"another error comes first ({events[0].record.id})"
            elif events:
                other_first = other_first or f"vLLM cannot build {getattr(events[0], 'config_class', 'a config')} first"
            else:
                needs = next((u.missing for u in outcome.unknown if u.record.id == search.record.id), ())
                other_first = other_first or ("kb check leaves it undecided: it needs " + ", ".join(
                    n[:60] for n in needs[:2]) if needs else "kb check does not predict it for the launch")
            if tried >= MAX_SOLUTIONS:
                break
            continue
        valid = outcome.valid.get(search.record.id, {})
        fixed = _after(search, draft, valid)
        if fixed is not None:
            return draft, fixed[0], fixed[1], valid
        alone = len(outcome.predicted) + len(outcome.validation) + (outcome.parse_error is not None) == 1
        no_change = no_change or ("no single change makes kb check predict no error" if alone else
                                  "no single change makes kb check predict no error: the launches kb found raise other errors too")
        if tried >= MAX_SOLUTIONS:
            break
    if search.dropped:
        reasons.append(OVER_BUDGET)
        return None
    if no_change:
        reasons.append(no_change)
        return None
    if other_first or undecided:
        reasons.append(other_first or undecided)
    elif search.needs:
        reasons.append("vLLM's condition reads what a launch does not give: " + ", ".join(
            n[:80] for n in sorted(set(search.needs))[:3]))
    elif any(r.kind == "env" for r in search.check.refs):
        names = sorted({r.key for r in search.check.refs if r.kind == "env"})
        reasons.append(f"it depends on the environment ({', '.join(names[:3])}), which kb check reads at its defaults")
    elif any(r.kind == "platform" for r in search.check.refs):
        reasons.append("not raised on an NVIDIA GPU (CUDA), the platform kb check assumes, for the values kb tries")
    elif search.steps >= MAX_STEPS:
        reasons.append(f"no launch found within {MAX_STEPS} steps")
    else:
        reasons.append("no launch kb can write raises it (the condition never holds for the values kb tries)")
    return None
