"""Runs INSIDE the oracle venv: one case through vLLM's own `vllm serve` parsing and config building.

    python case.py RESULT.json -- ARG...        (ARG... = what follows `vllm serve`)

Steps, each as vLLM's CLI does them (vllm/entrypoints/cli/main.py, cli/serve.py,
launchers/api_server/entry.py), stopping before the engine starts:

  argparse  the top-level parser's parse_args(["serve", *ARGS]) (FlexibleArgumentParser: --model
            moved to the positional, underscores, -O, dotted JSON keys, --config YAML ...)
  validate  configure_logging_from_args(args); ServeSubcommand.validate(args)
            (= validate_parsed_serve_args)
  config    args.model = args.model_tag when given (ServeSubcommand.cmd);
            AsyncEngineArgs.from_cli_args(args); propagate_flash_late_interaction(args, engine_args);
            engine_args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER,
            headless=args.headless)

Not run: the rest of ServeSubcommand.cmd (its data-parallel load-balancing and --headless /
--api-server-count checks) and everything after create_engine_config (engine, workers, server).

The result JSON: {"outcome": "ok", "summary": {...}} or {"outcome": "error", "stage": ...,
"exception": class name, "message": ..., ...}; "exit" for a SystemExit with code 0 (e.g. --help).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import sys
import time
import traceback
from pathlib import Path

_OUT = Path(sys.argv[1])
_ARGS = sys.argv[sys.argv.index("--") + 1:]
# vLLM reads sys.argv while building its parser (vllm/engine/arg_utils.py): make it a real run's.
sys.argv = ["vllm", "serve", *_ARGS]

sys.path.insert(0, str(Path(__file__).resolve().parent))

T0 = time.monotonic()
RESULT: dict = {"outcome": None}
WARNINGS: list[str] = []


class _Collect(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            try:
                WARNINGS.append(f"{record.levelname} {record.name}: {record.getMessage()}")
            except Exception:  # noqa: BLE001 - a bad log call must not hide the case's result
                pass


def _hook_logging() -> None:
    """Collect vLLM's warnings (again after vLLM reconfigures its logging)."""
    lg = logging.getLogger("vllm")
    if not any(isinstance(h, _Collect) for h in lg.handlers):
        lg.addHandler(_Collect())


def _vllm_root() -> str:
    import vllm
    return os.path.dirname(os.path.abspath(vllm.__file__))


def _raised_at(exc: BaseException) -> dict | None:
    """The innermost traceback frame inside the vllm package (else the innermost frame)."""
    tb = exc.__traceback__
    if tb is None:
        return None
    frames = traceback.extract_tb(tb)
    try:
        root = _vllm_root()
    except Exception:  # noqa: BLE001
        root = None
    pick = None
    for fr in frames:
        if root and os.path.abspath(fr.filename).startswith(root + os.sep):
            pick = fr
    pick = pick or frames[-1]
    path = os.path.abspath(pick.filename)
    if root and path.startswith(root + os.sep):
        path = "vllm/" + os.path.relpath(path, root).replace(os.sep, "/")
    return {"file": path, "line": pick.lineno, "function": pick.name, "code": pick.line}


def _jsonable(value, depth: int = 0):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if depth < 4 and isinstance(value, (list, tuple)):
        return [_jsonable(v, depth + 1) for v in value]
    if depth < 4 and isinstance(value, dict):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    return repr(value)


def _short(value, limit: int = 300):
    """A validation error's input, cut (a model-level error's input is the whole config's repr)."""
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + "..."
    if not isinstance(value, str) and len(json.dumps(value, default=repr)) > limit:
        return _short(json.dumps(value, default=repr), limit)
    return value


def _describe(exc: BaseException, stage: str) -> dict:
    out = {
        "outcome": "error",
        "stage": stage,
        "exception": type(exc).__name__,
        "exception_module": type(exc).__module__,
        "message": str(exc),
        "raised_at": _raised_at(exc),
    }
    try:
        from pydantic import ValidationError
    except ImportError:  # pragma: no cover
        ValidationError = ()  # type: ignore[assignment]
    if ValidationError and isinstance(exc, ValidationError):
        errors = exc.errors()
        out["validation_text"] = str(exc)
        out["validation_title"] = exc.title
        out["validation_errors"] = [
            {"type": e.get("type"), "loc": _jsonable(e.get("loc")), "msg": e.get("msg"),
             "input": _short(_jsonable(e.get("input")))}
            for e in errors
        ]
        if errors:
            first = errors[0]
            inner = (first.get("ctx") or {}).get("error")
            if isinstance(inner, BaseException):
                # A validator raised: the message is the inner exception's own text
                # (pydantic shows it as "Value error, <message>").
                out["message"] = str(inner)
                out["inner_exception"] = type(inner).__name__
                out["raised_at"] = _raised_at(inner) or out["raised_at"]
            else:
                out["message"] = first.get("msg", str(exc))
            out["validation_loc"] = _jsonable(first.get("loc"))
    cause = exc.__cause__ or exc.__context__
    if cause is not None and not isinstance(exc, SystemExit):
        out["cause"] = {"exception": type(cause).__name__, "message": str(cause)}
    out["traceback"] = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-6000:]
    return out


def _argparse_message(stderr_text: str) -> str:
    """The `prog: error: MESSAGE` part of argparse's exit text (MESSAGE may span lines)."""
    marker = ": error: "
    idx = stderr_text.find(marker)
    if idx < 0:
        return stderr_text.strip()
    return stderr_text[idx + len(marker):].strip()


def _summary(cfg) -> dict:
    def get(obj, *names):
        for n in names:
            obj = getattr(obj, n, None)
            if obj is None:
                return None
        return _jsonable(obj if isinstance(obj, (bool, int, float, str)) else str(obj))

    return {
        "model": get(cfg, "model_config", "model"),
        "architecture": get(cfg, "model_config", "architecture"),
        "dtype": get(cfg, "model_config", "dtype"),
        "max_model_len": get(cfg, "model_config", "max_model_len"),
        "tensor_parallel_size": get(cfg, "parallel_config", "tensor_parallel_size"),
        "pipeline_parallel_size": get(cfg, "parallel_config", "pipeline_parallel_size"),
        "data_parallel_size": get(cfg, "parallel_config", "data_parallel_size"),
        "decode_context_parallel_size": get(cfg, "parallel_config", "decode_context_parallel_size"),
        "world_size": get(cfg, "parallel_config", "world_size"),
        "distributed_executor_backend": get(cfg, "parallel_config", "distributed_executor_backend"),
        "gpu_memory_utilization": get(cfg, "cache_config", "gpu_memory_utilization"),
        "block_size": get(cfg, "cache_config", "block_size"),
        "max_num_batched_tokens": get(cfg, "scheduler_config", "max_num_batched_tokens"),
        "max_num_seqs": get(cfg, "scheduler_config", "max_num_seqs"),
        "lora_max_rank": get(cfg, "lora_config", "max_lora_rank"),
        "use_v2_model_runner": get(cfg, "use_v2_model_runner"),
    }


def main() -> None:
    global RESULT
    stage = "import"
    try:
        _hook_logging()
        from vllm_cli import build_parsers

        parser, _serve, cmd = build_parsers()
        from vllm.platforms import current_platform
        from vllm.triton_utils import HAS_TRITON

        RESULT["platform"] = {
            "class": f"{type(current_platform).__module__}.{type(current_platform).__qualname__}",
            "device_count": current_platform.device_count(),
            "device_name": current_platform.get_device_name(),
            "capability": str(current_platform.get_device_capability()),
            "memory_gib": current_platform.get_device_total_memory() / (1 << 30),
            "has_triton": bool(HAS_TRITON),
        }
        _hook_logging()

        stage = "argparse"
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                args = parser.parse_args(["serve", *_ARGS])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            text = err.getvalue()
            if code == 0:
                RESULT = {"outcome": "exit", "stage": stage, "code": 0}
            else:
                RESULT = {"outcome": "error", "stage": stage, "exception": "SystemExit",
                          "exit_code": code, "message": _argparse_message(text), "stderr": text[-4000:]}
            return
        finally:
            sys.stderr.write(err.getvalue())

        stage = "validate"
        from vllm.logger import configure_logging_from_args

        configure_logging_from_args(args)
        _hook_logging()
        cmd.validate(args)

        stage = "config"
        import vllm
        from vllm.entrypoints.common.cli_args import propagate_flash_late_interaction
        from vllm.usage.usage_lib import UsageContext

        if getattr(args, "model_tag", None) is not None:
            args.model = args.model_tag
        engine_args = vllm.AsyncEngineArgs.from_cli_args(args)
        propagate_flash_late_interaction(args, engine_args)
        cfg = engine_args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER,
                                               headless=bool(getattr(args, "headless", False)))
        platform = RESULT.get("platform")
        RESULT = {"outcome": "ok", "summary": _summary(cfg), "platform": platform}
    except SystemExit as e:  # a SystemExit outside argparse (vLLM code calling sys.exit)
        platform = RESULT.get("platform")
        RESULT = _describe(e, stage)
        RESULT["platform"] = platform
    except BaseException as e:  # noqa: BLE001 - every failure is a result
        platform = RESULT.get("platform")
        RESULT = _describe(e, stage)
        RESULT["platform"] = platform


if __name__ == "__main__":
    try:
        main()
    finally:
        RESULT["warnings"] = list(dict.fromkeys(WARNINGS))[:50]
        RESULT["inner_s"] = round(time.monotonic() - T0, 2)
        _OUT.write_text(json.dumps(RESULT, indent=1, default=repr) + "\n")
        sys.stdout.flush()
        sys.stderr.flush()
        # Skip interpreter teardown (vLLM/torch atexit hooks can be slow); the result is written.
        os._exit(0)
