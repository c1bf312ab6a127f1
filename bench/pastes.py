"""Score `kb explain` on the labelled real pastes of tests/data/real_pastes.yaml.

Each vLLM paste is labelled (from the source of the release the user ran, not from kb's
output) with the file and line of the raise in that release's wheel; the label's id is the id
of the site kb's scan finds there. Two runs: with the match index of the user's release
("told the release"), and with the pinned release's index alone, as `kb explain` runs on a
fresh machine (with the shipped wordings). In the second, an answer is right when it names the
label's id or the id that error became (the same chain of the release history: an edited or
moved message, up to its last id when it was removed since). Non-vLLM pastes must match
nothing.

    python bench/pastes.py [FILE]    (default: tests/data/real_pastes.yaml)
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kb.explain.match import Matcher, explain, load_index  # noqa: E402
from kb.jobs import match_index_for, scan_release  # noqa: E402
from kb.releases.published import pinned_release  # noqa: E402
from kb.releases.wording import load  # noqa: E402
from kb.scan.source import SourceSpec  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "tests/data/real_pastes.yaml"


def era(release: str) -> str:
    minor = int(release.split(".")[1])
    return "0.2-0.5" if minor <= 5 else "0.6-0.11" if minor <= 11 else "0.12-0.33"


def main() -> None:
    data = Path(sys.argv[1]) if len(sys.argv) > 1 else DATA
    scores, by_era, unlabelled = score(yaml.safe_load(data.read_text(encoding="utf-8")))
    for name, c in scores.items():
        print(f"{name:>16}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    for name, c in sorted(by_era.items()):
        print(f"{'era ' + name:>16}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    print(f"{'unlabelled':>16}: {unlabelled} (the label's file and line hold no scanned site)")


def score(cases: list[dict[str, Any]]) -> tuple[dict[str, Counter[str]], dict[str, Counter[str]], int]:
    """(verdicts per run: `user release` and `pinned X`; verdicts by era of the user release, for
    the first run; pastes whose label names no scanned site)."""
    matchers: dict[str, Matcher] = {}
    sites: dict[str, dict[tuple[str, int], str]] = {}

    def matcher(release: str) -> Matcher:
        if release not in matchers:
            matchers[release] = Matcher(load_index(match_index_for(SourceSpec(vllm_version=release))))
        return matchers[release]

    def label_id(release: str, file: str, line: int) -> str | None:
        if release not in sites:
            scan = scan_release(SourceSpec(vllm_version=release))
            sites[release] = {(s.file, s.line): s.id for s in scan.sites}
        return sites[release].get((file, line))

    pinned = pinned_release()
    chain_of = {w.id: w.chain for w in load()[1]}

    def chain(ids: set[str]) -> set[str]:
        return {chain_of.get(i, i) for i in ids}
    scores: dict[str, Counter[str]] = {"user release": Counter(), f"pinned {pinned}": Counter()}
    by_era: dict[str, Counter[str]] = {}
    unlabelled = 0
    for case in cases:
        expect = case.get("expect")
        text = case["paste"]
        if expect in (None, "none"):
            for name in scores:
                m = matcher(pinned)
                scores[name]["none: unmatched" if not explain(text, m).found else "none: WRONG (matched)"] += 1
            continue
        release = str(case.get("label_release") or "")
        wanted = {label_id(release, expect["file"], int(expect["line"]))} if release else set()
        for alt in expect.get("alternatives") or []:
            wanted.add(label_id(release, alt["file"], int(alt["line"])))
        wanted.discard(None)
        if not wanted:
            unlabelled += 1
            continue
        for name, m in (("user release", matcher(release)), (f"pinned {pinned}", matcher(pinned))):
            ex = explain(text, m)
            ids = [f.best.id for f in ex.found]
            others = [o.id for f in ex.found for o in f.others]
            if name != "user release":
                wanted = chain(wanted)
                ids = [f.best.entry.get("chain") or f.best.id for f in ex.found]
                others = [o.entry.get("chain") or o.id for f in ex.found for o in f.others]
            if ids[:1] and ids[0] in wanted:
                verdict = "right first"
            elif set(ids[1:] + others) & wanted:
                verdict = "found later"
            elif ids:
                verdict = "wrong"
            else:
                verdict = "none"
            scores[name][verdict] += 1
            if name == "user release":
                by_era.setdefault(era(release), Counter())[verdict] += 1
    return scores, by_era, unlabelled


if __name__ == "__main__":
    main()
