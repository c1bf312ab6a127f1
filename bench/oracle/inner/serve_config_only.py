"""Runs INSIDE the oracle venv: `vllm serve ARG...` exactly as vLLM's console script runs it
(`vllm.entrypoints.cli.main.main`: its parser, plugins, logging, validation, `ServeSubcommand.cmd`,
the API server's `create_engine_config`), stopped with exit code 0 once the engine config is built.
What follows (the engine core and the workers) needs real GPUs: on fake ones it fails at the
device, and that failure is vLLM's own error, not the launch's.

    python serve_config_only.py ARG...          (ARG... = what follows `vllm serve`)

The stop is the one change: `EngineArgs.create_engine_config` is wrapped to exit after it
returns (an error it raises goes out unchanged, through one more frame)."""

from __future__ import annotations

import sys

# vLLM reads sys.argv while importing and building its parser (vllm/engine/arg_utils.py): a real run's.
sys.argv = ["vllm", "serve", *sys.argv[1:]]

import vllm.engine.arg_utils as arg_utils  # noqa: E402

_built = arg_utils.EngineArgs.create_engine_config


def _build_then_stop(self, *args, **kwargs):
    _built(self, *args, **kwargs)
    raise SystemExit(0)


arg_utils.EngineArgs.create_engine_config = _build_then_stop

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.exit(main())
