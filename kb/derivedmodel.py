"""What kb derives for one error from vLLM's source, kept apart from curated text: the condition
in words with what sets each input, the valid values `kb check` computes, an example fix that
`kb check` proves. Frozen, with a JSON form (the build caches it by content digest)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

DERIVED_FORMAT = "kb-derived-guidance/1"
LABEL = "derived from vLLM's source, proved by kb check"


@dataclass(frozen=True)
class DerivedFix:
    """A launch for which `kb check` predicts this error first, and the smallest change after which
    it predicts no error at all (both proved by kb/checks/verify.py `fix_problems`)."""

    before: str
    after: str
    change: str  # the change, in words (Markdown): "set `--decode-context-parallel-size` to `2`"
    model_config: dict[str, Any] = field(default_factory=dict)
    hardware: dict[str, Any] = field(default_factory=dict)
    # a request error's fix: the request's sampling parameters (SamplingParams' fields) on each side
    request_before: Optional[dict[str, Any]] = None
    request_after: Optional[dict[str, Any]] = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"before": self.before, "after": self.after, "change": self.change,
                               "modelConfig": self.model_config, "hardware": self.hardware}
        if self.request_before is not None:
            out.update(requestBefore=self.request_before, requestAfter=self.request_after)
        return out

    @staticmethod
    def from_json(d: dict[str, Any]) -> DerivedFix:
        return DerivedFix(d["before"], d["after"], d["change"], dict(d["modelConfig"]), dict(d["hardware"]),
                          d.get("requestBefore"), d.get("requestAfter"))


@dataclass(frozen=True)
class MessageCheck:
    """A derived check (kb/checks/derive.py, as its JSON) whose message prints a flag its condition
    reads: `kb explain` puts a pasted message's own values to it (kb/derived/values.py). `flags`:
    the JSON of each flag the message prints (kb.configmodel.Flag, without its help), whose
    values `kb check` tries."""

    check: list[Any]
    flags: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "flags": self.flags}

    @staticmethod
    def from_json(d: dict[str, Any]) -> MessageCheck:
        return MessageCheck(list(d["check"]), [dict(f) for f in d["flags"]])


@dataclass(frozen=True)
class DerivedGuidance:
    """One error's derived guidance. `meaning` is "" where kb has no words for its condition."""

    meaning: str = ""  # Markdown: "vLLM raises this in `X.y` when `--a` is greater than 1 and ..."
    condition: str = ""  # the condition alone, in words (Markdown)
    inputs: str = ""  # Markdown: what sets each input the condition reads
    reading: str = ""  # "check" (the check kb derives, kb/checks/derive.py) or "guard" (the raise's own guard)
    valid: tuple[tuple[str, tuple[Any, ...]], ...] = ()  # flag -> values with which no check reading it raises
    fix: Optional[DerivedFix] = None
    no_fix: str = ""  # why kb found no proved fix for an error it derives a check for
    message_checks: tuple[MessageCheck, ...] = ()  # what `kb explain` evaluates for a paste's values

    @property
    def empty(self) -> bool:
        return not self.meaning and self.fix is None and not self.valid

    def to_json(self) -> dict[str, Any]:
        return {"meaning": self.meaning, "condition": self.condition, "inputs": self.inputs, "reading": self.reading,
                "valid": [[k, list(v)] for k, v in self.valid],
                "fix": self.fix.to_json() if self.fix is not None else None, "noFix": self.no_fix,
                "messageChecks": [c.to_json() for c in self.message_checks]}

    @staticmethod
    def from_json(d: dict[str, Any]) -> DerivedGuidance:
        return DerivedGuidance(d["meaning"], d["condition"], d["inputs"], d["reading"],
                               tuple((k, tuple(v)) for k, v in d["valid"]),
                               DerivedFix.from_json(d["fix"]) if d["fix"] is not None else None, d["noFix"],
                               tuple(MessageCheck.from_json(c) for c in d.get("messageChecks", ())))
