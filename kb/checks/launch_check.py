"""One launch checked as `kb check` does, against records and a flag model prepared once: vLLM's
parser (kb/checks/cli_parse.py), pydantic's field constraints (kb/checks/order.py), the curated
checks (kb/checks/predict.py), each error's valid values (kb/checks/valid.py). `kb check` and the
oracle agreement bench call the same function."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Optional

from kb.checks.cli_parse import has_parser, parse_command
from kb.checks.launch import ConfigFile, parse_launch, serve_words
from kb.checks.order import validation_failures
from kb.checks.predict import Outcome, predict
from kb.checks.valid import valid_values
from kb.config.model import ConfigModel
from kb.model import Record


def check_one(records: Sequence[Record], flags: Optional[ConfigModel], argv: Sequence[str],
              model_config: Optional[ConfigFile] = None, hardware: Optional[dict[str, object]] = None,
              with_valid: bool = True) -> Outcome:
    outcome = predict(records, parse_launch(argv, model_config, hardware))
    if with_valid:
        outcome = replace(outcome, valid={p.record.id: valid_values(records, outcome, p.record)
                                          for p in outcome.predicted})
    if flags is None or not has_parser(flags):
        return outcome  # no parser in the tree: the flags kb would accept are not known
    parsed = parse_command(flags, serve_words(argv))
    failures = () if parsed.error is not None else tuple(validation_failures(flags, parsed.values, parsed.given))
    return replace(outcome, parse_error=parsed.error, validation=failures, build_order=flags.build_order)
