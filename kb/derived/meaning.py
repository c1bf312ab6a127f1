"""What an error means, in words derived from vLLM's source: the condition it is raised under,
over the flags, config.json keys, environment variables and request fields that set it, and
what each of those is. Only where the condition names something a user sets; else nothing."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Optional

from kb.checks.compiled import Derived
from kb.config.resolve import SetByReader
from kb.configmodel import ConfigModel
from kb.derived import words as w
from kb.derived.condition import USER_KINDS, Condition, check_condition, guard_condition
from kb.model import Record
from kb.records.present import code_span

MAX_WORDS = 700  # characters of a condition in words; a longer one helps nobody
MAX_INPUTS = 6  # inputs described after the condition


def _said(condition: Condition) -> Optional[str]:
    """The condition in words, when they name at least one input users set and stay short."""
    words = w.Words(condition.labels)
    try:
        text = words.condition(condition.node)
    except (w.TooComplex, RecursionError, ValueError):
        return None
    if text in ("always", "never") or len(text) > MAX_WORDS:
        return None
    if not any(condition.labels[n].kind in USER_KINDS for n in words.spoken if n in condition.labels):
        return None
    return text


def condition_words(record: Record, checks: Sequence[Derived], reader: SetByReader,
                    model: Optional[ConfigModel]) -> tuple[str, str, list[w.Label]]:
    """(the condition in words, the reading it comes from, the user inputs it names) or ("", "", [])."""
    if model is not None:
        for check in checks:
            try:
                cond = check_condition(check, model)
            except (SyntaxError, ValueError, RecursionError):
                continue
            text = _said(cond)
            if text is not None:
                return text, "check", cond.user_labels
    cond_or_none = guard_condition(record.sites[0], reader, model)
    if cond_or_none is not None:
        text = _said(cond_or_none)
        if text is not None:
            return text, "guard", cond_or_none.user_labels
    return "", "", []


def meaning_text(record: Record, condition: str) -> str:
    where = record.sites[0].fact.qualname
    more = f" (and at {len(record.sites) - 1} more places in the same file)" if len(record.sites) > 1 else ""
    return f"vLLM raises this in {code_span(where)}{more} when {condition}."


def inputs_text(labels: Sequence[w.Label], model: Optional[ConfigModel]) -> str:
    """What sets each input the condition names, in one sentence."""
    parts: list[str] = []
    seen: set[tuple[str, str]] = set()
    for label in labels:
        key = (label.kind, label.plain)
        if key in seen:
            continue
        seen.add(key)
        parts.append(_input(label, model))
        if len(parts) >= MAX_INPUTS:
            break
    return ("What it reads: " + "; ".join(parts) + ".") if parts else ""


def _input(label: w.Label, model: Optional[ConfigModel]) -> str:
    name = code_span(label.text)
    if label.kind in (w.FLAG, w.GIVEN):
        flag = model.flag(label.text) if model is not None else None
        if flag is None:
            return f"{name}, a flag of `vllm serve`"
        if label.switch:
            default = "on" if flag.default is True else "off"
            return f"{name}, a switch of `vllm serve` ({default} by default)"
        if flag.default_exact and flag.default is None:
            return f"{name}, a flag of `vllm serve` (not given by default)"
        if flag.default_exact and isinstance(flag.default, (str, int, float)):
            return f"{name}, a flag of `vllm serve` (default {code_span(json.dumps(flag.default) if not isinstance(flag.default, str) else flag.default)})"
        return f"{name}, a flag of `vllm serve`"
    if label.kind == w.FLAG_KEY:
        return f"{name}, a key of the JSON value of {code_span(label.parent)}"
    if label.kind == w.CONFIG_JSON:
        return f"{name}, a key of the model's config.json"
    if label.kind == w.ENV:
        env = next((e for e in model.env if e.name == label.text), None) if model is not None else None
        if env is not None and env.default_exact and env.default is None:
            return f"{name}, an environment variable (not set by default)"
        if env is not None and env.default_exact:
            return f"{name}, an environment variable (default {code_span(json.dumps(env.default))})"
        return f"{name}, an environment variable"
    if label.kind == w.REQUEST:
        field = next((f for f in model.request_fields if f.name == label.text), None) if model is not None else None
        if field is not None and field.default_exact and not field.required and field.default is None:
            return f"{name}, a field of each request (not given by default)"
        if field is not None and field.default_exact and not field.required:
            return f"{name}, a field of each request (default {code_span(json.dumps(field.default))})"
        return f"{name}, a field of each request"
    return name
