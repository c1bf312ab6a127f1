"""One request's sampling parameters, as `kb check --request` and the derived example fixes give
them: a JSON object of `SamplingParams` fields (vllm/sampling_params.py, read from the release's own
source: kb/config/requests.py), the names `LLM.generate`'s `SamplingParams(...)` takes. Read in
bounded time and memory; a field the release does not have is refused with the fields it has."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kb.config.order import REQUEST_CLASS
from kb.configmodel import ConfigModel
from kb.errors import UsageError

MAX_REQUEST_BYTES = 1024 * 1024  # a request's sampling parameters are a few hundred bytes
MAX_DEPTH = 20  # nesting of a value (structured_outputs holds a JSON schema)
MAX_DIGITS = 400  # an integer's digits: vLLM's guards compare numbers, nothing needs more
WHERE = "--request"


def read_request(text: str, model: ConfigModel) -> dict[str, Any]:
    """`text`: the JSON itself (it starts with `{` or `[`), or a file holding it."""
    where = WHERE
    if text.lstrip()[:1] not in ("{", "["):
        path = Path(text)
        where = text
        try:
            if not path.is_file():
                raise UsageError("no such file (give the JSON object itself, or a file holding it)", where)
            with open(path, "rb") as f:
                raw = f.read(MAX_REQUEST_BYTES + 1)
        except OSError as e:
            raise UsageError(f"not readable: {e.strerror or e}", where) from None
        if len(raw) > MAX_REQUEST_BYTES:
            raise UsageError(f"larger than {MAX_REQUEST_BYTES // 1024} KiB", where)
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise UsageError(f"not UTF-8 (byte {e.start})", where) from None
    elif len(text.encode("utf-8", "surrogatepass")) > MAX_REQUEST_BYTES:
        raise UsageError(f"larger than {MAX_REQUEST_BYTES // 1024} KiB", where)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"not JSON: {e.msg} (line {e.lineno}, column {e.colno})", where) from None
    except (RecursionError, ValueError) as e:
        raise UsageError(f"not JSON: {'nested too deeply' if isinstance(e, RecursionError) else e}", where) from None
    return request_values(data, model, where)


def request_values(data: Any, model: ConfigModel, where: str = WHERE) -> dict[str, Any]:
    """The sampling parameters of a decoded request, checked: an object of the release's
    SamplingParams fields, each value plain JSON of bounded depth and size."""
    if not isinstance(data, dict):
        raise UsageError("must be a JSON object of sampling parameters, e.g. '{\"temperature\": 0.7}'", where)
    fields = {f.name for f in model.request_fields if f.model == REQUEST_CLASS}
    if not fields:
        raise UsageError(f"this vLLM tree has no {REQUEST_CLASS} fields kb could read", where)
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key not in fields or key.startswith("_"):
            shown = json.dumps(key, ensure_ascii=True)[:80]
            raise UsageError(f"{shown} is not a field of {REQUEST_CLASS} in this release "
                             f"(kb checks the sampling parameters, as `SamplingParams(...)` names them: "
                             f"{', '.join(sorted(fields)[:12])}, ...)", where)
        _plain(value, f"{where}: {key}", 0)
        out[key] = value
    return out


def _plain(value: Any, where: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise UsageError(f"nested more than {MAX_DEPTH} deep", where)
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int):
        if abs(value) >= 10 ** MAX_DIGITS:
            raise UsageError(f"an integer of more than {MAX_DIGITS} digits", where)
        return
    if isinstance(value, float):
        return  # NaN and the infinities too: vLLM's own checks say what it makes of them
    if isinstance(value, list):
        for item in value:
            _plain(item, where, depth + 1)
        return
    if isinstance(value, dict):
        for k, item in value.items():
            _plain(item, f"{where}.{k}"[:200], depth + 1)
        return
    raise UsageError(f"not a JSON value: {type(value).__name__}", where)


def request_text(request: Mapping[str, Any]) -> str:
    """The request as `--request` takes it: compact JSON, keys in the order given."""
    return json.dumps(dict(request), ensure_ascii=False, allow_nan=True)


def python_value(value: Any) -> str:
    """A JSON value as Python writes it in `SamplingParams(...)`."""
    if isinstance(value, float) and not math.isfinite(value):
        return f'float("{value}")'
    return repr(value)


def sampling_params_text(request: Mapping[str, Any]) -> str:
    """`SamplingParams(temperature=-1.0)`: the request as `LLM.generate` takes it."""
    return f"SamplingParams({', '.join(f'{k}={python_value(v)}' for k, v in request.items())})"
