"""Run inside the oracle venv: vLLM's `environment_variables`, each getter called in the
(empty) environment this process was started with; stdout is JSON."""

import json
import sys

import vllm.envs as e

out = {}
for name, getter in e.environment_variables.items():
    try:
        value = getter()
        try:
            json.dumps(value)
            entry = {"default": value, "exact": True}
        except TypeError:
            entry = {"default": repr(value), "exact": False}
    except Exception as x:  # a getter that fails with nothing set
        entry = {"default": f"<{type(x).__name__}>", "exact": False}
    out[name] = entry
json.dump({"environment_variables": out}, sys.stdout, indent=1, sort_keys=True)
