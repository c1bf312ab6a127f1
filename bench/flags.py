"""`kb flags` against vLLM itself: the flags of the real `vllm serve --help=all`, recorded by
bench/oracle/help.py in tests/data/vllm-0.33.0-flags.json, compared with the flag model kb
reads from the same release's wheel (through kb's own download and cache code).

Prints the share of vLLM's argparse actions that kb finds (same dest and the same option
strings shown by --help), and of those the share with the same default and the same choices;
then every difference. A few older releases are read too (their layouts differ): kb must not
fail on them and should find flags.

    python bench/flags.py [--vllm-version 0.33.0] [--oracle FILE] [--older 0.10.2,0.6.6.post1] [--quiet]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kb.configmodel import ConfigModel, Flag  # noqa: E402

ORACLE = Path(__file__).resolve().parent.parent / "tests" / "data" / "vllm-0.33.0-flags.json"


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON (so that True is not 1 and 1 is not 1.0)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@dataclass
class Comparison:
    total: int = 0
    found: int = 0
    same_default: int = 0
    same_choices: int = 0
    same_both: int = 0
    same_help: int = 0
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)

    @property
    def found_share(self) -> float:
        return self.found / self.total if self.total else 0.0

    @property
    def same_share(self) -> float:
        """Of the flags found, those with the same default and the same choices."""
        return self.same_both / self.found if self.found else 0.0


def _key(visible: list[str], dest: str) -> tuple[str, tuple[str, ...]]:
    return dest, tuple(sorted(visible))


def compare(model: ConfigModel, oracle: dict[str, Any]) -> Comparison:
    ours: dict[tuple[str, tuple[str, ...]], Flag] = {_key(list(f.visible), f.dest): f for f in model.flags}
    c = Comparison()
    seen = set()
    for action in oracle["actions"]:
        c.total += 1
        key = _key(action["visible_option_strings"], action["dest"])
        name = (action["visible_option_strings"] or [action["dest"]])[0]
        flag = ours.get(key)
        if flag is None:
            c.missing.append(f"{name} (dest {action['dest']})")
            continue
        seen.add(key)
        c.found += 1
        default_ok = _same(flag.default, action["default"]) and (not flag.default_exact) == action["default_is_repr"]
        choices_ok = _same(list(flag.choices) if flag.choices is not None else None, action["choices"])
        c.same_default += default_ok
        c.same_choices += choices_ok
        c.same_both += default_ok and choices_ok
        c.same_help += _help(action["help"]) == " ".join(flag.help.split())
        if not default_ok:
            c.differences.append(f"{name}: default {_short(flag.default)} (vLLM: {_short(action['default'])})")
        if not choices_ok:
            c.differences.append(f"{name}: choices {flag.choices} (vLLM: {action['choices']})")
    c.extra = [f.name for k, f in ours.items() if k not in seen]
    return c


def _help(text: str | None) -> str:
    """vLLM's help as printed, without argparse's "(default: ...)" and line breaks."""
    return " ".join(re.sub(r"\s*\(default: .*\)\Z", "", text or "", flags=re.S).split())


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 120 else text[:117] + "..."


def flag_model(version: str) -> ConfigModel:
    from kb.config.read import read_config
    from kb.paths import cache_dir
    from kb.scan.source import download_wheel, from_wheel

    with from_wheel(download_wheel(version, cache_dir()), include_vendored=False) as tree:
        return read_config(tree.paths, tree.read)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--vllm-version", default="0.33.0")
    p.add_argument("--oracle", default=str(ORACLE))
    p.add_argument("--older", default="0.10.2,0.6.6.post1", help="releases only read (no oracle): comma-separated")
    p.add_argument("--quiet", action="store_true", help="figures only, not every difference")
    args = p.parse_args(argv)
    oracle = json.loads(Path(args.oracle).read_text())
    start = time.perf_counter()
    model = flag_model(args.vllm_version)
    elapsed = time.perf_counter() - start
    c = compare(model, oracle)
    print(f"vLLM {args.vllm_version}: {c.total} argparse actions in `vllm serve --help=all`; kb read "
          f"{len(model.flags)} flags in {elapsed:.2f} s (wheel read and parsed)")
    print(f"  found:                   {c.found}/{c.total} = {100 * c.found_share:.1f}%")
    print(f"  same default:            {c.same_default}/{c.found}")
    print(f"  same choices:            {c.same_choices}/{c.found}")
    print(f"  same default and choices: {c.same_both}/{c.found} = {100 * c.same_share:.1f}%")
    print(f"  same help text:          {c.same_help}/{c.found}")
    print(f"  defaults kb could not follow: {model.counts['defaults_unresolved']}; warnings: {len(model.warnings)}")
    if not args.quiet:
        for line in c.missing:
            print(f"  missing: {line}")
        for line in c.extra:
            print(f"  not in vLLM's: {line}")
        for line in c.differences:
            print(f"  differs: {line}")
        for w in model.warnings:
            print(f"  warning: {w}")
    for version in [v.strip() for v in args.older.split(",") if v.strip()]:
        start = time.perf_counter()
        older = flag_model(version)
        print(f"vLLM {version}: {len(older.flags)} flags in {time.perf_counter() - start:.2f} s, "
              f"{older.counts['defaults_unresolved']} defaults not followed, {len(older.warnings)} warnings"
              + (f" (from {older.parser_file})" if older.parser_file else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
