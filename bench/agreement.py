"""`kb check` against real vLLM on recorded launches (tests/data/oracle-launch-<version>.json,
oracle-order-, -parse-, -derived-, -flags-, -computed- and -capability-<version>.json, made by bench/oracle/*_cases.py):
for each case, is kb's first error vLLM's first error? Counts: same first error, kb predicts it but
not first, another error first (wrong), missed, false alarm, both clean; by the stage vLLM stopped
at (argparse, config) and the exception. Runs through kb's own download and cache code
(`KB_CACHE_DIR`), never vLLM. An error raised while building configs is the same when it is
raised at the same place (the raise site vLLM's traceback ends at; for pydantic, the line of
create_engine_config that builds the config); argparse's by its message.

    python bench/agreement.py [--vllm-version 0.33.0] [--show 20]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kb import PINNED_VLLM  # noqa: E402
from kb.checks.launch import ConfigFile  # noqa: E402
from kb.checks.launch_check import check_one  # noqa: E402
from kb.checks.order import ValidationFailure  # noqa: E402
from kb.jobs import curated_records, scan_release  # noqa: E402
from kb.scan.source import SourceSpec  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
sys.path.insert(0, str(Path(__file__).resolve().parent / "oracle"))
from common import DEFAULT_HARDWARE  # noqa: E402  (stdlib only: what the oracle fakes when a case does not say)


def hardware_of(case: dict[str, Any]) -> dict[str, Any]:
    """What the oracle faked for the case, as kb check's hardware."""
    hw = {**DEFAULT_HARDWARE, **(case.get("hardware") or {})}
    return {"gpu_count": hw["count"], "gpu_memory_gib": float(hw["memory_gib"]), "gpu_name": hw["name"],
            "compute_capability": float(hw["capability"])}


def words_of(argv: list[str]) -> list[str]:
    if "$MODEL" not in argv and not any(w == "--model" or w.startswith("--model=") for w in argv):
        argv = ["$MODEL", *argv]
    return ["vllm", "serve", *("org/model" if w == "$MODEL" else w for w in argv)]


def fits(template: str, message: str) -> bool:
    """vLLM's message is the record's template with its placeholders filled (kb could not fill them)."""
    parts = re.split(r"\{[^{}]*\}", template)
    return re.fullmatch(".*?".join(re.escape(p) for p in parts), message, re.DOTALL) is not None or \
        (len(parts) > 1 and message.startswith(parts[0]) and len(parts[0]) > 20)


_PYDANTIC_LINK = re.compile(r"\n +For further information visit https://errors\.pydantic\.dev/\S+")


def same(said: Optional[str], real: str) -> bool:
    """The same words; pydantic's link to its docs (which names the pydantic version) left out."""
    real = _PYDANTIC_LINK.sub("", real)
    return said is not None and (said == real or f"  {real} [" in said or said.endswith(real))


def model_folder(case: dict[str, Any]) -> ConfigFile:
    """The case's config.json with the *.json files bench/oracle/run_case.py wrote beside it."""
    written = {"config.json", *(("tokenizer.json", "tokenizer_config.json") if case.get("tokenizer", True) else ()),
               *(case.get("files") or {})}
    return ConfigFile("config.json", case["config"] or {}, beside=tuple(sorted(n for n in written if n.endswith(".json"))))


def verdicts(version: str) -> tuple[Counter[str], list[tuple[str, Any]], float]:
    scan = scan_release(SourceSpec(vllm_version=version))
    records = curated_records([("", scan)], None).records
    cases: list[dict[str, Any]] = []
    for name, default_config in (("launch", None), ("order", None), ("parse", "config"), ("derived", None),
                                 ("flags", None), ("computed", None), ("capability", None)):
        path = DATA / f"oracle-{name}-{version}.json"
        if not path.is_file():
            continue
        doc = json.loads(path.read_text())
        for c in doc["cases"]:
            config = c.get("config") or (doc["models"][c["model"]] if "model" in c else doc.get(default_config or ""))
            cases.append({**c, "config": config, "set": name})
    counts: Counter[str] = Counter()
    shown: list[tuple[str, Any]] = []
    start = time.perf_counter()
    for c in cases:
        outcome = check_one(records, scan.config, words_of(c["argv"]), model_folder(c), hardware_of(c), with_valid=False)
        events: list[tuple[Any, ...]] = []  # (message, raise sites[, template]) in kb's order
        stop = outcome.parse_error
        if stop is not None:
            events.append((stop.message if stop.stage == "argparse" else stop.printed, set()))
        for e in outcome.in_order():
            if isinstance(e, ValidationFailure):
                events.append((e.printed, {("vllm/engine/arg_utils.py", e.made_at or e.built_at)}))
            else:
                events.append((e.message, {(s.file, s.line) for s in e.record.sites}, e.record.template))
        real_ok = c["outcome"] == "ok"
        kind = "ok" if real_ok else f"{c['stage']}:{c.get('exception')}"
        at = c.get("raised_at") or {}
        where = (at.get("file"), at.get("line")) if c.get("stage") == "config" and at else None

        def hit(event: tuple[Any, ...]) -> bool:
            if where is not None:
                return where in event[1]
            real = c["message"] or ""
            return same(event[0], real) or (len(event) > 2 and fits(event[2], real))

        if real_ok:
            verdict = "both clean" if not events else "false alarm"
        elif not events:
            verdict = "missed"
        elif hit(events[0]):
            verdict = "same first error"
        elif stop is not None and not stop.exact and c["stage"] == "argparse" and stop.option and \
                (c["message"] or "").startswith(f"argument {stop.option}"):
            verdict = "same first error, other words"
        elif any(hit(e) for e in events[1:]):
            verdict = "predicted, not first"
        else:
            verdict = "another error first"
        counts[verdict] += 1
        counts[f"{verdict} | {kind}"] += 1
        counts[f"{verdict} @ {c['set']}"] += 1
        if verdict not in ("both clean", "same first error"):
            shown.append((verdict, {"set": c["set"], "argv": c["argv"], "vllm": (c["message"] or "")[:160],
                                    "kb": events[0][0][:160] if events else None}))
    return counts, shown, (time.perf_counter() - start) / max(1, len(cases))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vllm-version", default=PINNED_VLLM)
    ap.add_argument("--show", type=int, default=20)
    args = ap.parse_args()
    counts, shown, per_case = verdicts(args.vllm_version)
    total = sum(v for k, v in counts.items() if "|" not in k and "@" not in k)
    print(f"vllm {args.vllm_version}: {total} real-vLLM cases, kb check {per_case * 1000:.1f} ms per case (library)")
    for verdict in ("same first error", "same first error, other words", "both clean", "predicted, not first",
                    "another error first", "missed", "false alarm"):
        print(f"  {verdict:22s} {counts[verdict]:4d}  {counts[verdict] / max(1, total):6.1%}")
    agree = counts["same first error"] + counts["same first error, other words"] + counts["both clean"]
    print(f"agreement (same first error or both clean): {agree}/{total} = {agree / max(1, total):.1%}")
    print("by set:")
    for name in sorted({k.split(" @ ")[1] for k in counts if " @ " in k}):
        n = sum(v for k, v in counts.items() if k.endswith(f" @ {name}"))
        good = sum(counts[f"{v} @ {name}"] for v in ("same first error", "same first error, other words", "both clean"))
        print(f"  {name:8s} {good:4d}/{n:<4d} = {good / max(1, n):6.1%}  false alarms {counts[f'false alarm @ {name}']}, "
              f"another error first {counts[f'another error first @ {name}']}, missed {counts[f'missed @ {name}']}")
    print("by what vLLM did:")
    for key, n in sorted(((k, v) for k, v in counts.items() if "|" in k), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {n:4d}  {key}")
    for verdict, case in shown[: args.show]:
        print(f"{verdict}: {json.dumps(case)}")


if __name__ == "__main__":
    main()
