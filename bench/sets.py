"""What sets each error, measured on a real vLLM release (kb.config.resolve): the share of error
ids with a reachability class, of config-time sites (`vllm/config/`, `vllm/engine/arg_utils.py`)
and of all sites whose every guard input is resolved, the facts of the DCP page, and the names
left unresolved most often. Scans through kb's own download and cache code (`KB_CACHE_DIR`).

    python bench/sets.py [--vllm-version 0.33.0] [--top 25]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kb import PINNED_VLLM  # noqa: E402
from kb.config.resolve import SetByReader
from kb.jobs import scan_release  # noqa: E402
from kb.records.merge import attach_set_by, build_records  # noqa: E402
from kb.scan.source import SourceSpec  # noqa: E402
from kb.setby import REACHABILITY  # noqa: E402

DCP = "d97d5d8528e2b364"
CONFIG_TIME = ("vllm/config/", "vllm/engine/arg_utils.py")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vllm-version", default=PINNED_VLLM)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    scan = scan_release(SourceSpec(vllm_version=args.vllm_version))
    start = time.perf_counter()
    records = attach_set_by(build_records(scan), scan.config)
    t_records = time.perf_counter() - start
    reader = SetByReader(scan.config)
    classed = sum(r.setby is not None and r.setby.reachability in REACHABILITY for r in records)
    print(f"vllm {args.vllm_version}: {len(records)} error ids, {len(scan.sites)} sites, "
          f"{len(scan.config.flags) if scan.config else 0} flags; records with what sets them in {t_records:.2f} s")
    print(f"error ids with a reachability class   {classed}/{len(records)} = {classed / len(records):.1%}  (target 100%)")
    for cls, n in Counter(r.setby.reachability for r in records if r.setby).most_common():
        print(f"  {cls:22s} {n:6d}  {n / len(records):6.1%}")
    config_sites = [s for s in scan.sites if s.file.startswith(CONFIG_TIME)]
    unresolved: Counter[str] = Counter()
    for label, sites in (("config-time sites", config_sites), ("all sites", list(scan.sites))):
        ok = 0
        for s in sites:
            sb = reader.set_by([s])
            ok += sb.resolved
            if label == "config-time sites":
                unresolved.update(i.key for i in sb.inputs if not i.resolved)
        target = "  (target >= 90%)" if label == "config-time sites" else ""
        print(f"{label:20s} every guard input resolved  {ok}/{len(sites)} = {ok / len(sites):.1%}{target}")
    kinds = Counter(i.kind for r in records if r.setby for i in r.setby.inputs)
    print("inputs by kind: " + ", ".join(f"{k} {n}" for k, n in kinds.most_common()))
    dcp = next((r for r in records if r.id == DCP), None)
    if dcp is not None and dcp.setby is not None:
        print(f"DCP {DCP}: {dcp.setby.reachability}; trigger: {dcp.setby.trigger}")
        for i in dcp.setby.inputs + dcp.setby.earlier:
            print(f"  {i.kind:12s} {i.key:34s} default {i.default}")
    print(f"names left unresolved most often at config-time sites (top {args.top}):")
    for key, n in unresolved.most_common(args.top):
        print(f"  {n:4d}  {key}")


if __name__ == "__main__":
    main()
