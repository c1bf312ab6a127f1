"""The checks kb derives from vLLM's guards (kb/checks/derive.py) on a release, and `kb check`'s
speed: how many config-time raise sites (`vllm/config/`, `vllm/engine/arg_utils.py`) become a check,
how many of those read only launch-time values (flags, config.json keys, environment variables, the
platform), why the rest are not checkable (grouped), and how often each check decides a launch of
the recorded real-vLLM cases (tests/data/oracle-*.json). Then `kb check` run as users run it,
warm (its index built), against a floor measured in the same run: Python starting and importing
kb's CLI.

    python bench/derived.py [--vllm-version 0.33.0] [--rounds 7] [--reasons 25]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kb import PINNED_VLLM  # noqa: E402
from kb.checks.facts import facts_of, run  # noqa: E402
from kb.checks.launch_check import derived_index  # noqa: E402
from kb.jobs import curated_records, scan_release  # noqa: E402
from kb.scan.source import SourceSpec  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
REFERENCE = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 6144,
             "num_attention_heads": 48, "num_key_value_heads": 8, "num_hidden_layers": 4, "intermediate_size": 16384,
             "vocab_size": 32000, "max_position_embeddings": 8192}


def coverage(version: str, reasons: int) -> None:
    from kb.checks.cli_parse import parse_command

    scan = scan_release(SourceSpec(vllm_version=version))
    records = curated_records([("", scan)], None).records
    assert scan.config is not None
    index = derived_index(records, scan.config)
    full = [c for c in index.checks if not any(r.kind == "unknown" for r in c.refs)]
    n = index.sites
    print(f"vllm {version}: {n} config-time raise sites")
    print(f"  become a check (vLLM's condition compiled):  {len(index.checks):4d}  {len(index.checks) / max(1, n):6.1%}")
    print(f"  of which read only launch-time values:       {len(full):4d}  {len(full) / max(1, n):6.1%}")
    print(f"  not checkable:                               {len(index.uncheckable):4d}")
    kinds = Counter(r.kind for c in index.checks for r in c.refs)
    print("  values the checks read, by kind: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    grouped = Counter(re.sub(r"\b[A-Z]\w*Config\.\w+|`[^`]*`|\w+\.\w+\(\)", "…", u.reason.split(":")[0])[:90]
                      for u in index.uncheckable)
    print("  why not checkable:")
    for reason, count in grouped.most_common(reasons):
        print(f"    {count:4d}  {reason}")
    decided: Counter[str] = Counter()
    cases = 0
    for path in sorted(DATA.glob(f"oracle-*-{version}.json")):
        doc = json.loads(path.read_text())
        for c in doc["cases"]:
            config = c.get("config") or (doc["models"][c["model"]] if "model" in c else doc.get("config")) or {}
            argv = ["org/model" if w == "$MODEL" else w for w in c["argv"]]
            parsed = parse_command(scan.config, argv)
            if parsed.error is not None:
                continue
            cases += 1
            facts = facts_of(scan.config, parsed.values, config)
            for check in index.checks:
                if run(check, facts, "").raises is not None:
                    decided[f"{check.record_id}:{check.line}"] += 1
    print(f"  on the {cases} recorded real-vLLM launches that parse: {len(decided)} checks decide at least one "
          f"(raises or clean), {sum(decided.values()) / max(1, cases):.1f} checks decided per launch")


def speed(version: str, rounds: int) -> None:
    env = {**os.environ}
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.json"
        config.write_text(json.dumps(REFERENCE))
        check = [sys.executable, "-m", "kb", "check", "--vllm-version", version, "--model-config", str(config),
                 "--gpu-count", "16", "--", "vllm", "serve", "m", "-tp", "16", "-dcp", "3"]
        floor_cmd = [sys.executable, "-c", "import kb.cli"]
        subprocess.run(check, env=env, capture_output=True)  # builds the index when it is not there

        def timed(cmd: list[str]) -> float:
            start = time.perf_counter()
            subprocess.run(cmd, env=env, capture_output=True)
            return time.perf_counter() - start

        warm = [timed(check) for _ in range(rounds)]
        floor = [timed(floor_cmd) for _ in range(rounds)]
    w, f = statistics.median(warm), statistics.median(floor)
    print(f"kb check, warm (median of {rounds}): {w * 1000:.0f} ms; floor (python -c 'import kb.cli'): "
          f"{f * 1000:.0f} ms; ratio {w / f:.2f}; target < 300 ms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vllm-version", default=PINNED_VLLM)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reasons", type=int, default=25)
    args = ap.parse_args()
    coverage(args.vllm_version, args.reasons)
    speed(args.vllm_version, args.rounds)


if __name__ == "__main__":
    main()
