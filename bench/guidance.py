"""Derived guidance on a release (kb/derived/): how many errors get curated guidance, derived
guidance (the condition in words, valid values, a proved example fix) or neither (noindex pages);
the errors kb derives a launch check for without finding a proved fix, grouped by why; and the
time the derivation takes, cold (computed) and warm (read from the cache by digest).

    python bench/guidance.py [--vllm-version 0.34.0] [--reasons 30] [--jobs N]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kb import PINNED_VLLM
from kb.checks.derive import derive
from kb.derived.attach import attach_derived
from kb.derived.guidance import guidance
from kb.jobs import curated_records, scan_release
from kb.scan.source import SourceSpec


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--vllm-version", default=PINNED_VLLM)
    parser.add_argument("--reasons", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    scan = scan_release(SourceSpec(vllm_version=args.vllm_version))
    records = curated_records([("", scan)], None).records
    with tempfile.TemporaryDirectory() as cache:
        start = time.perf_counter()
        attached = attach_derived(records, scan.config, args.jobs, Path(cache))
        cold = time.perf_counter() - start
        start = time.perf_counter()
        attach_derived(records, scan.config, args.jobs, Path(cache))
        warm = time.perf_counter() - start
    live = [r for r in attached if r.removed_since is None]
    derived = [r for r in live if r.derived is not None]
    counts = Counter()
    for r in live:
        g = guidance(r)
        counts["curated"] += r.curated
        counts["derived meaning"] += bool(r.derived and r.derived.meaning)
        counts["derived valid values"] += bool(r.derived and r.derived.valid)
        counts["derived fix (proved)"] += bool(r.derived and r.derived.fix)
        counts["uncurated, derived guidance"] += (not r.curated and g.helps)
        counts["neither (noindex)"] += not g.helps
    with_check = [r for r in derived if r.derived is not None and (r.derived.fix is not None or r.derived.no_fix)]
    print(f"vllm {args.vllm_version}: {len(live)} errors")
    for key in ("curated", "derived meaning", "derived valid values", "derived fix (proved)",
                "uncurated, derived guidance", "neither (noindex)"):
        print(f"  {key:32s} {counts[key]:5d}")
    print(f"  errors with a derived launch check: {len(with_check)}, proved fix for "
          f"{counts['derived fix (proved)']}; why not for the others:")
    reasons = Counter(re.split(r"[:(]", r.derived.no_fix)[0].strip()
                      for r in with_check if r.derived is not None and r.derived.no_fix)
    for reason, n in reasons.most_common(args.reasons):
        print(f"    {n:4d}  {reason}")
    index = derive([s for r in live for s in r.sites], scan.config)
    known = {c.record_id for c in index.checks if not any(ref.kind == "unknown" for ref in c.refs)}
    fixed = {r.id for r in live if r.derived is not None and r.derived.fix is not None}
    print(f"  of which every value the check reads is known before launch: {len(known)}, proved fix for "
          f"{len(known & fixed)}")
    print(f"  time: {cold:.1f} s computed ({args.jobs} jobs), {warm:.2f} s read from the cache")


if __name__ == "__main__":
    main()
