"""How fast kb answers once warm: `kb explain`, `kb search`, `kb check` and `kb fit`, each run
several times in a subprocess of its own, and the median CPU time (user + sys, from os.wait4) of
each printed beside the floor measured in the same run (`python -c "import kb.cli"`) and the
ratio; then `kb mcp` started once over stdio and the median and longest wall time of N tool calls
of each of `explain`, `search_errors` and `check_launch` (a few different questions in turn).

    python bench/cli_speed.py [--runs 5] [--calls 20] [--no-bytecode-cache] [--json]

The release is the pinned one, from the cache `KB_CACHE_DIR` names (its wheel must be there:
`kb scan` fetches it once). Each command runs once untimed first (warm: a missing answer store or
index is built then). Imports read cached bytecode from a temporary folder (PYTHONPYCACHEPREFIX),
as an installed kb does; `--no-bytecode-cache` compiles kb's modules in every run instead
(PYTHONDONTWRITEBYTECODE), the worst case.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PASTE = ("ERROR 01-02 03:04:05 [core.py:123] ValueError: Total number of attention heads (32) must be divisible by "
         "tensor parallel size (3).")
WORDS = "attention heads divisible"
LAUNCH = ["vllm", "serve", "meta-llama/Llama-3.1-8B", "-tp", "3"]
LLAMA3_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
             "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
             "num_hidden_layers": 32, "vocab_size": 128256, "max_position_embeddings": 131072,
             "torch_dtype": "bfloat16", "rope_theta": 500000.0}


def commands(config: Path) -> dict[str, list[str]]:
    kb = [sys.executable, "-m", "kb"]
    return {
        "import kb.cli (floor)": [sys.executable, "-c", "import kb.cli"],
        "kb explain PASTE": [*kb, "explain", PASTE],
        "kb search WORDS": [*kb, "search", WORDS],
        "kb check -- LAUNCH": [*kb, "check", "--", *LAUNCH],
        "kb fit -- LAUNCH": [*kb, "fit", "--model-config", str(config), "--gpu", "h100", "--", *LAUNCH[:3]],
    }


def cpu_seconds(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """CPU (user + sys) and wall seconds of one run, and its exit code."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            env=env, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, time.perf_counter() - start, proc.returncode


class Server:
    """`kb mcp` over stdio, a JSON-RPC line at a time."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "kb", "mcp"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.next_id = 0

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def request(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], float]:
        """The reply to one request and its wall seconds."""
        assert self.proc.stdin is not None
        self.next_id += 1
        start = time.perf_counter()
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                                          "params": params}).encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            reply = json.loads(self.lines.get(timeout=600))
            if reply.get("id") == self.next_id:
                return reply, time.perf_counter() - start

    def notify(self, method: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=120)


# what the tool calls ask, in turn: common words too ("max model len" matches most errors)
MCP_CALLS = {
    "explain": [{"text": PASTE}, {"text": "ValueError: max_num_batched_tokens (2048) is smaller than max_model_len "
                                          "(8192)."}, {"text": "nothing vLLM raises"}],
    "search_errors": [{"query": WORDS}, {"query": "max model len"}, {"query": "lora rank"},
                      {"query": PASTE}],
    "check_launch": [{"command": " ".join(LAUNCH)}, {"command": "vllm serve Qwen/Qwen3-8B --max-model-len 0"}],
}


def mcp_figures(env: dict[str, str], calls: int) -> dict[str, float]:
    """Seconds to the initialize answer, to the first answer of each tool, and the median and the
    longest of `calls` more of each (cycling through MCP_CALLS)."""
    tools = {name: asks[0] for name, asks in MCP_CALLS.items()}
    start = time.perf_counter()
    server = Server(env)
    try:
        server.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                      "clientInfo": {"name": "bench", "version": "1"}})
        out = {"started": time.perf_counter() - start}
        server.notify("notifications/initialized")
        for name, arguments in tools.items():
            reply, took = server.request("tools/call", {"name": name, "arguments": arguments})
            if reply.get("result", {}).get("isError"):
                raise SystemExit(f"{name}: {reply['result']['content'][0]['text']}")
            out[f"{name} first"] = took
        for name, asks in MCP_CALLS.items():
            times = [server.request("tools/call", {"name": name, "arguments": asks[n % len(asks)]})[1]
                     for n in range(calls)]
            out[name], out[name + " max"] = statistics.median(times), max(times)
    finally:
        server.close()
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--no-bytecode-cache", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kb-cli-speed-") as tmp:
        env = dict(os.environ)
        if args.no_bytecode_cache:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        else:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        config = Path(tmp) / "config.json"
        config.write_text(json.dumps(LLAMA3_8B), encoding="utf-8")
        figures: dict[str, dict[str, float]] = {}
        for name, command in commands(config).items():
            _, _, code = cpu_seconds(command, env)  # warm: bytecode, answer stores, indexes
            runs = [cpu_seconds(command, env) for _ in range(args.runs)]
            figures[name] = {"cpu": statistics.median(r[0] for r in runs), "wall": statistics.median(r[1] for r in runs),
                             "exit": code}
        mcp = mcp_figures(env, args.calls)
    floor = figures["import kb.cli (floor)"]["cpu"]
    if args.json:
        print(json.dumps({"commands": figures, "floor": floor, "mcp_seconds": mcp}, indent=1))
        return 0
    print(f"median of {args.runs} warm runs, CPU user+sys ({'no bytecode cache' if args.no_bytecode_cache else 'bytecode cached'})")
    for name, f in figures.items():
        print(f"  {name:24} {f['cpu']:6.3f} s CPU  {f['cpu'] / floor:5.1f}x floor  ({f['wall']:.3f} s wall, exit {f['exit']:.0f})")
    print(f"kb mcp over stdio: initialize answered after {mcp['started'] * 1000:.0f} ms; {args.calls} calls of each tool")
    for name in MCP_CALLS:
        print(f"  {name:14} median {mcp[name] * 1000:6.1f} ms, longest {mcp[name + ' max'] * 1000:6.1f} ms   "
              f"(first call {mcp[name + ' first'] * 1000:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
