"""Does the first answer help? On the labelled real pastes, as `kb explain --json` answers on a
fresh machine (the pinned release, the shipped wordings, no site): the share of matched pastes
whose first answer is a live page with a fix, for the paste's own error.

Per paste with a vLLM label (the file and line of the raise in the release the user ran, read
from that release's source): the label's id is the id kb's scan of that release finds there.
Its error in the pinned release, from the source alone: the id its release history (the shipped
wordings, made by scanning every published wheel) leads to when the pinned release still raises
it (its `current` id, or where the history's edits lead), and every id of the pinned release that
raises the same message text (the label's wording, or any wording of its history). For an error the pinned release no longer raises, the live
error a curated entry declares as its successor (`supersedes:` in errors/*.yaml: verified by
`kb lint` and by reading the sources) counts too, and is counted apart.

The first answer (`found[0].answer` of `kb explain --json`; before it existed, `found[0].match`)
helps when its page (`url`) is an error the pinned release raises (a live page), its `solution`
is given (curated, or derived from vLLM's source and proved by kb check: kb gives a derived first
fix only with a proved example fix), and it is the paste's own error as above.

    python bench/first_answer.py [-v] [FILE ...]   (default: both sets in tests/data/; -v: each miss)
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Optional

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kb.explain.match import Matcher, explain, load_index  # noqa: E402
from kb.explain.output import explanation_json  # noqa: E402
from kb.jobs import match_index_for, scan_release  # noqa: E402
from kb.paths import data_dir  # noqa: E402
from kb.releases.published import pinned_release  # noqa: E402
from kb.releases.wording import load  # noqa: E402
from kb.scan.literals import literal_parts  # noqa: E402
from kb.scan.source import SourceSpec  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "tests/data"
SETS = (DATA / "real_pastes.yaml", DATA / "real_pastes_heldout.yaml")


def _text(template: str) -> tuple[str, ...]:
    """A template's literal text, as the lookup compares messages."""
    return tuple(literal_parts(template)[0])


def declared_successors(folder: Optional[Path] = None) -> dict[str, set[str]]:
    """removed id -> the live ids whose curated entry says it `supersedes` it (read from the YAML)."""
    out: dict[str, set[str]] = {}
    for p in sorted((folder or data_dir("errors")).glob("*.yaml")):
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
        if not isinstance(doc, dict):
            continue
        for old in doc.get("supersedes") or ():
            out.setdefault(str(old), set()).add(str(doc.get("id")))
    return out


class Truth:
    """What the sources say of a label in the pinned release."""

    def __init__(self) -> None:
        self.pinned = pinned_release()
        scan = scan_release(SourceSpec(vllm_version=self.pinned))
        self.live = {s.id for s in scan.sites if s.id}
        self.live_by_text: dict[tuple[str, ...], set[str]] = {}
        for s in scan.sites:
            self.live_by_text.setdefault(_text(s.template), set()).add(s.id)
        self.wordings = {w.id: w for w in load()[1]}
        self.family: dict[str, list[str]] = {}
        for w in self.wordings.values():
            self.family.setdefault(w.chain, []).append(w.id)
        self.successors = declared_successors()
        self.sites: dict[str, dict[tuple[str, int], str]] = {}

    def label_id(self, release: str, file: str, line: int) -> Optional[str]:
        if release not in self.sites:
            self.sites[release] = {(s.file, s.line): s.id for s in scan_release(SourceSpec(vllm_version=release)).sites}
        return self.sites[release].get((file, line))

    def edits(self, w: Any) -> set[str]:
        """The ids the history's edits (`next`) lead to from a wording, through any loop."""
        out: set[str] = set()
        ident = w.next
        while ident and ident not in out and ident != w.id:
            out.add(ident)
            later = self.wordings.get(ident)
            ident = later.next if later is not None else ""
        return out

    def targets(self, label: str) -> tuple[set[str], set[str]]:
        """(live ids that are the label's error by the source, live ids declared its successor)."""
        w = self.wordings.get(label)
        chain = w.chain if w is not None else label
        ids = set(self.family.get(chain, [label])) | {label}
        source = {chain} & self.live
        for i in ids:
            wi = self.wordings.get(i)
            if wi is not None:
                source |= self.live_by_text.get(_text(wi.template), set())
                source |= {n for n in self.edits(wi) if n in self.live}
        declared = {s for i in ids for s in self.successors.get(i, ())} & self.live
        return source, declared - source


def first_answers(cases: list[dict[str, Any]], truth: Truth, matcher: Matcher,
                  misses: Optional[list[str]] = None) -> Counter[str]:
    """Verdicts by kind; `misses` gets a line for each matched paste whose first answer does not help."""
    out: Counter[str] = Counter()
    for case in cases:
        expect = case.get("expect")
        if expect in (None, "none"):
            continue
        release = str(case.get("label_release") or "")
        labels = {truth.label_id(release, expect["file"], int(expect["line"]))}
        for alt in expect.get("alternatives") or []:
            labels.add(truth.label_id(release, alt["file"], int(alt["line"])))
        labels.discard(None)
        if not labels:
            out["unlabelled"] += 1
            continue
        out["labelled"] += 1
        found = json.loads(explanation_json(explain(case["paste"], matcher)))["found"]
        if not found:
            continue
        out["matched"] += 1
        # the first answer: `answer` (kb since issue #31), else the match and the page its `url` names
        first = found[0].get("answer") or found[0]["match"]
        url = first.get("url") or ""
        page = url.rstrip("/").rsplit("/", 1)[-1] if url else ""
        source: set[str] = set()
        declared: set[str] = set()
        for label in labels:
            s, d = truth.targets(str(label))
            source |= s
            declared |= d
        if not page:
            verdict = "first answer: no page"
        elif page not in truth.live:
            verdict = "first answer: a removed error's page"
        elif not first.get("solution"):
            verdict = "first answer: live, no fix"
        elif page in source:
            verdict = "HELPS (the same error, by the source)"
        elif page in declared:
            verdict = "HELPS (its declared successor)"
        elif not source and not declared:
            verdict = "first answer: live with a fix, the label's error has no live page"
        else:
            verdict = "first answer: live with a fix, another error"
        out[verdict] += 1
        if misses is not None and not verdict.startswith("HELPS"):
            misses.append(f"{verdict}: {case['url']} label {sorted(labels)} -> first {first['id']} page {page or '-'}"
                          f" (the label's live ids: {sorted(source | declared) or 'none'})")
        if first.get("curated") and page in truth.live:
            out["(first answer curated and live)"] += 1
    return out


def main() -> None:
    args = sys.argv[1:]
    verbose = "-v" in args
    files = [Path(a) for a in args if a != "-v"] or list(SETS)
    truth = Truth()
    matcher = Matcher(load_index(match_index_for(SourceSpec(vllm_version=truth.pinned))))
    for path in files:
        misses: list[str] = []
        c = first_answers(yaml.safe_load(path.read_text(encoding="utf-8")), truth, matcher, misses)
        helps = c["HELPS (the same error, by the source)"] + c["HELPS (its declared successor)"]
        share = helps / c["matched"] if c["matched"] else 0.0
        print(f"{path.name}: {helps} of {c['matched']} matched pastes ({share:.0%}) lead with a live page with a fix "
              f"for their error (pinned {truth.pinned}; {c['labelled']} labelled)")
        for k, v in sorted(c.items()):
            print(f"    {k}: {v}")
        if verbose:
            for line in misses:
                print(f"  - {line}")


if __name__ == "__main__":
    main()
