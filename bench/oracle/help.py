#!/usr/bin/env python3
"""Dump real vLLM's `vllm serve --help=all` and its serve parser, on the fake GPUs.

    python3 bench/oracle/help.py [--version 0.33.0] [--help-out FILE] [--flags-out FILE]
                                 [--columns 80] [--count 8 --capability 9.0 --memory-gib 80 --name ...]

Writes (by default) tests/data/vllm-<version>-help-all.txt: the stdout of the venv's own
``vllm serve --help=all`` console script, run with COLUMNS fixed (argparse wraps to it); and
tests/data/vllm-<version>-flags.json: every action of vLLM's serve parser (bench/oracle/inner/
dump_parser.py). Needs `python3 bench/oracle/setup.py` first (it runs it if the venv is missing).
Runs on any python3: vLLM is only imported in the venv's own processes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DEFAULT_HARDWARE, DEFAULT_VERSION, HERE, REPO, oracle_env, venv_dir, venv_python  # noqa: E402


def ensure_setup(version: str) -> None:
    if not venv_python(version).exists() or not (venv_dir(version) / "kb-oracle.json").exists():
        subprocess.run([sys.executable, str(HERE / "setup.py"), "--version", version], check=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", default=DEFAULT_VERSION)
    ap.add_argument("--help-out", type=Path)
    ap.add_argument("--flags-out", type=Path)
    ap.add_argument("--columns", type=int, default=80, help="terminal width argparse wraps to (default 80)")
    ap.add_argument("--count", type=int, default=DEFAULT_HARDWARE["count"])
    ap.add_argument("--capability", default=DEFAULT_HARDWARE["capability"])
    ap.add_argument("--memory-gib", type=float, default=DEFAULT_HARDWARE["memory_gib"])
    ap.add_argument("--name", default=DEFAULT_HARDWARE["name"])
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args(argv)
    data = REPO / "tests" / "data"
    help_out = args.help_out or data / f"vllm-{args.version}-help-all.txt"
    flags_out = args.flags_out or data / f"vllm-{args.version}-flags.json"

    ensure_setup(args.version)
    hw = {"count": args.count, "capability": args.capability, "memory_gib": args.memory_gib, "name": args.name}
    env = oracle_env(hw, args.version)
    env["COLUMNS"] = str(args.columns)
    env["LINES"] = "50"

    t = time.monotonic()
    vllm_bin = venv_dir(args.version) / "bin" / "vllm"
    r = subprocess.run([str(vllm_bin), "serve", "--help=all"], env=env, capture_output=True, text=True,
                       timeout=args.timeout, cwd=str(venv_dir(args.version)))
    if r.returncode != 0 or not r.stdout.startswith("usage: vllm serve"):
        sys.stderr.write(r.stderr[-5000:])
        raise SystemExit(f"`vllm serve --help=all` failed (exit {r.returncode})")
    help_out.parent.mkdir(parents=True, exist_ok=True)
    help_out.write_text(r.stdout)
    t_help = time.monotonic() - t

    t = time.monotonic()
    tmp = venv_dir(args.version) / "kb-oracle-flags.tmp.json"
    r2 = subprocess.run([str(venv_python(args.version)), str(HERE / "inner" / "dump_parser.py"), str(tmp),
                         args.version], env=env, capture_output=True, text=True, timeout=args.timeout,
                        cwd=str(venv_dir(args.version)))
    if r2.returncode != 0:
        sys.stderr.write(r2.stderr[-5000:])
        raise SystemExit(f"dumping the serve parser failed (exit {r2.returncode})")
    doc = json.loads(tmp.read_text())
    doc["hardware"] = hw
    flags_out.parent.mkdir(parents=True, exist_ok=True)
    flags_out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    tmp.unlink()
    t_flags = time.monotonic() - t

    print(json.dumps({
        "help_all": str(help_out), "help_all_lines": r.stdout.count("\n"), "help_s": round(t_help, 1),
        "flags": str(flags_out), "actions": doc["action_count"], "flags_s": round(t_flags, 1),
    }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
