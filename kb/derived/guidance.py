"""THE answer for one error, section by section: curated text where an entry has it, else what kb
derives from vLLM's source (kb/derived/), else nothing (the section is left out: never a
placeholder). One function for every output: the error page, its Markdown twin, the API record,
the lookup's index (`kb explain`, the site's search) and the MCP tools."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from kb.derivedmodel import LABEL
from kb.model import Record
from kb.records.present import code_span

CURATED, DERIVED = "curated", "derived"
SHOWN_VALUES = 12  # valid values written out per flag


@dataclass(frozen=True)
class Fix:
    """An example fix as every output shows it."""

    language: str
    before: str
    after: str
    model_config: dict[str, Any]
    hardware: dict[str, Any]
    proved: bool  # `kb check` predicts the error for before and nothing for after (curated: verified; derived: always)
    origin: str  # curated or derived
    change: str = ""  # a derived fix's change in words (Markdown)


@dataclass(frozen=True)
class Guidance:
    """Each section with where it comes from ("" when there is nothing to say)."""

    meaning: str = ""  # Markdown
    meaning_from: str = ""
    inputs: str = ""  # derived: what sets each input the condition reads (Markdown)
    solutions: tuple[str, ...] = ()  # Markdown, most likely fix first
    solutions_from: str = ""
    fix: Optional[Fix] = None
    valid: tuple[tuple[str, tuple[Any, ...]], ...] = ()  # derived: flag -> values `kb check` accepts
    condition: str = ""  # derived: the condition in words (Markdown)
    trigger_from: str = ""  # curated (the entry's trigger) or derived (the condition in words), else ""

    @property
    def helps(self) -> bool:
        """Curated or derived guidance: something beyond the source's facts (pages without it are noindex)."""
        return bool(self.meaning or self.solutions or self.fix is not None)

    @property
    def derived_parts(self) -> list[str]:
        """The ErrorEntry fields of the API record filled from derived guidance."""
        parts = []
        if self.meaning_from == DERIVED:
            parts.append("documentation")
        if self.solutions_from == DERIVED:
            parts.append("solutions")
        if self.fix is not None and self.fix.origin == DERIVED:
            parts.append("exampleFix")
        if self.trigger_from == DERIVED:
            parts.append("triggerScenarios")
        return parts

    @property
    def first_fix(self) -> str:
        return self.solutions[0] if self.solutions else ""

    @property
    def derived(self) -> bool:
        return bool(self.derived_parts)


def guidance(record: Record) -> Guidance:
    e, d = record.entry, record.derived
    meaning, meaning_from, inputs = "", "", ""
    if e is not None and e.meaning.strip():
        meaning, meaning_from = e.meaning, CURATED
    elif d is not None and d.meaning:
        meaning, meaning_from, inputs = d.meaning, DERIVED, d.inputs
    fix: Optional[Fix] = None
    if e is not None and e.example_fix is not None:
        x = e.example_fix
        fix = Fix(x.language, x.before, x.after, dict(x.model_config), dict(x.hardware), record.checked, CURATED)
    elif d is not None and d.fix is not None and d.fix.request_before is not None:
        x2 = d.fix  # a request's fix: its sampling parameters, the launch as it is
        fix = Fix("python", request_example(x2.before, x2.request_before or {}),
                  request_example(x2.after, x2.request_after or {}), dict(x2.model_config), dict(x2.hardware), True,
                  DERIVED, x2.change)
    elif d is not None and d.fix is not None:
        x2 = d.fix
        fix = Fix("shell", x2.before, x2.after, dict(x2.model_config), dict(x2.hardware), True, DERIVED, x2.change)
    valid = d.valid if d is not None and fix is not None and fix.origin == DERIVED else ()
    solutions: tuple[str, ...] = ()
    solutions_from = ""
    if e is not None and e.solutions:
        solutions, solutions_from = tuple(e.solutions), CURATED
    elif fix is not None and fix.origin == DERIVED:
        solutions, solutions_from = derived_solutions(fix, valid), DERIVED
    trigger_from = CURATED if e is not None and e.trigger else DERIVED if d is not None and d.condition else ""
    return Guidance(meaning, meaning_from, inputs, solutions, solutions_from, fix, valid,
                    d.condition if d is not None else "", trigger_from)


def request_example(launch: str, request: dict[str, Any]) -> str:
    """A request's sampling parameters as `LLM.generate` takes them, under the launch that serves
    them; `kb check --request` reads the same fields as JSON."""
    import shlex

    from kb.checks.request import request_text, sampling_params_text

    return (f"# served by: {launch}\n{sampling_params_text(request)}\n"
            f"# kb check --request {shlex.quote(request_text(request))} -- {launch}")


def derived_solutions(fix: Fix, valid: tuple[tuple[str, tuple[Any, ...]], ...]) -> tuple[str, ...]:
    out = [f"{fix.change[:1].upper()}{fix.change[1:]}: the example fix below, which `kb check` proves."]
    for flag, values in valid[:3]:
        shown = ", ".join(code_span(value_text(v)) for v in values[:SHOWN_VALUES])
        more = " …" if len(values) > SHOWN_VALUES else ""
        out.append(f"Values of {code_span(flag)} with which `kb check` predicts no error of this kind, the rest of the "
                   f"example launch unchanged: {shown}{more}.")
    return tuple(out)


def value_text(value: Any) -> str:
    import json

    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def api_fields(record: Record) -> dict[str, Any]:
    """`kb.derived` of the API record: which ErrorEntry fields are derived, and the derived parts
    themselves; None where kb derives nothing."""
    g, d = guidance(record), record.derived
    if d is None or (d.empty and not d.no_fix):
        return {"derived": None}
    return {"derived": {
        "label": LABEL,
        "parts": g.derived_parts,
        "meaning": d.meaning or None,
        "condition": d.condition or None,
        "inputs": d.inputs or None,
        "reading": d.reading or None,
        "validValues": {flag: list(values) for flag, values in d.valid},
        "exampleFix": d.fix.to_json() if d.fix is not None else None,
        "noFix": d.no_fix or None,
    }}
