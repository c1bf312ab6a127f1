#!/usr/bin/env python3
"""Record real vLLM's environment variables and request fields, with their defaults.

    python3 bench/oracle/inputs.py [--version 0.33.0]

Writes tests/data/vllm-<version>-envs.json (every key of `vllm.envs.environment_variables`, with
what its getter returns in an empty environment) and tests/data/vllm-<version>-requests.json (the
fields of SamplingParams, ChatCompletionRequest and CompletionRequest, with their defaults). Both
run in the oracle venv (`python3 bench/oracle/setup.py` makes it) under `env -i HOME=/nonexistent`,
so defaults that name the home folder say /nonexistent; no GPU needed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DEFAULT_VERSION, HERE, REPO, venv_python  # noqa: E402

DUMPS = {"envs": "dump_envs.py", "requests": "dump_requests.py"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default=DEFAULT_VERSION)
    args = ap.parse_args()
    for kind, script in DUMPS.items():
        out = REPO / "tests" / "data" / f"vllm-{args.version}-{kind}.json"
        run = subprocess.run(["env", "-i", "HOME=/nonexistent", "PATH=/usr/bin:/bin", str(venv_python(args.version)),
                              str(HERE / "inner" / script)], check=True, capture_output=True, text=True)
        doc = json.loads(run.stdout)
        doc.update({"format": f"vllm-{kind}/1", "vllm": args.version,
                    "recorded_by": f"bench/oracle/inputs.py (env -i HOME=/nonexistent; bench/oracle/inner/{script})"})
        out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        print(f"{kind} -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
