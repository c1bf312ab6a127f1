#!/usr/bin/env python3
"""The vLLM plugin (kb/vllm_plugin/) against the real vLLM: real `vllm serve` runs in the oracle
venv (fake GPUs, bench/oracle/README.md), each with and without the plugin, in one run.

    python bench/oracle/plugin_run.py [--version 0.34.0] [--failing 24] [--good 10] [--serve 1] [--jobs 1]

- Failing launches: one per raise site among the oracle's recorded cases that vLLM stopped with
  an error raised at a `raise` of its own (tests/data/oracle-*-<version>.json), through the venv's
  own `vllm serve` console script. The expected id is labelled from vLLM's output, not kb's: the
  message the real run printed must match the template of the raise site the oracle recorded
  (file and line in vLLM's source; the scan gives the site's id and template, matched here
  with a regular expression of its literal parts). Each runs three times: without the plugin, with
  it answering from the release's answer store in kb's cache, and with it answering from what
  ships with kb (an empty cache). Passing: vLLM's own output (its traceback and error, the
  exit code) is the same with the plugin, our lines come after it, and they name the expected id.
- Good launches: recorded `ok` cases, through vLLM's console-script entry up to the end of config
  building (inner/serve_config_only.py: the engine needs real GPUs), with and without the plugin,
  alternating: no line of ours, and the time to start (medians).
- `--serve N`: N good launches through the whole `vllm serve`, which on fake GPUs fails in the
  workers at the device: the engine core and worker processes load the plugin, vLLM's errors
  there are printed as before, and kb's lines follow the API server's error that kb knows.

The plugin is off unless VLLM_PLUGINS names it (`fakegpu,vllm-error-kb`; without: `fakegpu`), so
"without" is vLLM without the plugin loaded at all. kb is not installed in the venv: a frozen copy
of this checkout (kb/ and errors/) with a hand-made dist-info holding pyproject's entry point goes
on PYTHONPATH, with kb's own dependencies the venv lacks (pip --target, once, in the oracle cache).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import HERE, REPO, cache_root, oracle_env, venv_dir, venv_python
from run_case import place_model, write_model

PLUGIN = "vllm-error-kb"  # the entry point's name (pyproject.toml)
OURS = "[vllm-error-kb] "  # what each of our lines begins with (kb/vllm_plugin/answer.py PREFIX)
SOURCES = ("plugin-store", "plugin-shipped")
_TRACEBACK = "Traceback (most recent call last):"


def kb_env(snapshot: Path, deps: Path, cache: Path, plugin: bool, hardware: dict[str, Any]) -> dict[str, str]:
    env = oracle_env(hardware, VERSION)
    env["PYTHONPATH"] = os.pathsep.join([str(snapshot), str(deps)])
    env["KB_CACHE_DIR"] = str(cache)
    env["VLLM_PLUGINS"] = f"fakegpu,{PLUGIN}" if plugin else "fakegpu"
    for key in ("KB_SITE_URL", "KB_VLLM_PLUGIN", "KB_VLLM_PLUGIN_SITE"):
        env.pop(key, None)
    return env


def missing_dependencies() -> list[str]:
    """kb's runtime dependencies (pyproject.toml) that the venv lacks."""
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    code = ("import importlib.metadata as m, json, re, sys\nout = []\n"
            "for d in json.loads(sys.argv[1]):\n"
            "    name = re.split(r'[<>=!~ ]', d, maxsplit=1)[0]\n"
            "    try: m.version(name)\n"
            "    except m.PackageNotFoundError: out.append(d)\n"
            "print(json.dumps(out))")
    done = subprocess.run([str(venv_python(VERSION)), "-c", code, json.dumps(deps)], capture_output=True, text=True,
                          check=True)
    return list(json.loads(done.stdout))


def install_dependencies(deps: Path) -> None:
    """kb's dependencies the venv lacks, into `deps` (pip --target; skipped when there)."""
    wanted = missing_dependencies()
    stamp = deps / "kb-plugin-deps.json"
    if stamp.is_file() and json.loads(stamp.read_text()) == wanted:
        return
    shutil.rmtree(deps, ignore_errors=True)
    if wanted:
        subprocess.run([str(venv_python(VERSION)), "-m", "pip", "install", "--quiet", "--target", str(deps), *wanted],
                       check=True)
    deps.mkdir(parents=True, exist_ok=True)
    stamp.write_text(json.dumps(wanted))
    print(f"kb's dependencies the venv lacks, installed into {deps}: {', '.join(wanted) or 'none'}", flush=True)


def snapshot_kb(folder: Path) -> Path:
    """A frozen copy of kb/ and errors/ (other edits of the checkout do not reach the runs) and a
    dist-info with pyproject's `vllm.general_plugins` entry point, for PYTHONPATH."""
    shutil.copytree(REPO / "kb", folder / "kb", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "errors", folder / "errors")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    points = project["entry-points"]["vllm.general_plugins"]
    info = folder / f"vllm_error_kb-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    (info / "entry_points.txt").write_text("[vllm.general_plugins]\n" +
                                           "".join(f"{k} = {v}\n" for k, v in points.items()))
    return folder


def compile_store(snapshot: Path, deps: Path, cache: Path) -> float:
    """The release's answer store of the frozen kb in `cache` (what `kb explain` compiles once),
    checked to be the one the plugin finds in the venv."""
    env = {**os.environ, "PYTHONPATH": str(snapshot), "KB_CACHE_DIR": str(cache)}
    t = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "kb", "explain", "--vllm-version", VERSION, "warm"], env=env,
                          capture_output=True, text=True, check=False)
    took = time.monotonic() - t
    env["PYTHONPATH"] = os.pathsep.join([str(snapshot), str(deps)])
    found = subprocess.run([str(venv_python(VERSION)), "-c",
                            "import sys\nfrom kb.jobs import stored_matcher_for\nfrom kb.scan.source import SourceSpec\n"
                            "sys.exit(stored_matcher_for(SourceSpec(vllm_version=sys.argv[1])) is None)", VERSION],
                           env=env, capture_output=True, text=True, check=False)
    if found.returncode != 0:
        raise SystemExit(f"no answer store of {VERSION} for the plugin in {cache}: {done.stderr[-500:]}"
                         f"{found.stderr[-500:]}")
    return took


# --- the cases ------------------------------------------------------------------------------
def recorded_cases() -> list[dict[str, Any]]:
    """Every recorded case of the release with its model config."""
    out = []
    for path in sorted((REPO / "tests" / "data").glob(f"oracle-*-{VERSION}.json")):
        doc = json.loads(path.read_text())
        models = doc.get("models") or {}
        for c in doc.get("cases", []):
            config = c.get("config") or models.get(c.get("model") or "")
            if isinstance(config, dict) and isinstance(c.get("argv"), list):
                out.append({**c, "config": config, "set": path.stem})
    return out


def failing_cases(cases: list[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """One case per raise site of vLLM's own `raise` that stopped a launch, in a fixed order."""
    by_site: dict[tuple[str, int], dict[str, Any]] = {}
    for c in cases:
        at = c.get("raised_at") or {}
        if c.get("outcome") == "error" and str(at.get("code", "")).startswith("raise") and at.get("file"):
            by_site.setdefault((at["file"], int(at["line"])), c)
    return [by_site[k] for k in sorted(by_site)][:count]


def good_cases(cases: list[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """Recorded `ok` launches, spread over the sets and models, in a fixed order."""
    ok = [c for c in cases if c.get("outcome") == "ok"]
    ok.sort(key=lambda c: (json.dumps(c["argv"]), c["set"]))
    seen: set[str] = set()
    out = []
    for c in ok:
        key = json.dumps([c.get("model"), c["config"].get("model_type"), len(c["argv"])])
        if key not in seen:
            seen.add(key)
            out.append(c)
    return (out + [c for c in ok if c not in out])[:count]


# --- labels from vLLM's own output ----------------------------------------------------------------
def site_labels() -> dict[tuple[str, int], tuple[str, str]]:
    """(file, line) of each raise site of the release -> (id, template): kb's scan of the wheel."""
    sys.path.insert(0, str(REPO))
    from kb.jobs import scan_release
    from kb.scan.source import SourceSpec

    result = scan_release(SourceSpec(vllm_version=VERSION))
    return {(s.file, s.line): (s.id, s.template) for s in result.sites}


def template_regex(template: str) -> re.Pattern[str]:
    """The template as a regular expression over text with its white space runs made one space:
    its literal parts in order, anything for each placeholder."""
    sys.path.insert(0, str(REPO))
    from kb.scan.messages import template_parts

    parts, _ = template_parts(template)
    return re.compile("(.*?)".join(re.escape(re.sub(r"\s+", " ", p)) for p in parts), re.DOTALL)


def vllm_error(stderr: str) -> str:
    """The error the run printed last: from the last traceback's end (`Class: message`, and the
    lines of a pydantic ValidationError after it)."""
    mine = [line for line in stderr.splitlines() if not line.startswith(OURS)]
    start = max((i for i, line in enumerate(mine) if line.startswith(_TRACEBACK)), default=-1)
    tail = mine[start + 1:] if start >= 0 else mine
    at = next((i for i, line in enumerate(tail) if not line.startswith(" ") and ":" in line), len(tail))
    return "\n".join(tail[at:])


def own_part(stderr: str) -> str:
    """vLLM's error as it printed it: the last traceback to the end, our lines left out."""
    lines = [line for line in stderr.splitlines() if not line.startswith(OURS)]
    start = max((i for i, line in enumerate(lines) if line.startswith(_TRACEBACK)), default=0)
    return "\n".join(lines[start:])


def normalized(stderr: str) -> list[str]:
    """vLLM's lines without ours, pids and log times made alike (they differ from run to run):
    vLLM's prefix `(Worker pid=123) ERROR 12-07 04:02:15`, torch's `W1207 04:46:12.544000 4993`."""
    out = []
    for line in stderr.splitlines():
        if not line.startswith(OURS):
            line = re.sub(r"pid=\d+", "pid=<pid>", re.sub(r"\b\d\d-\d\d \d\d:\d\d:\d\d\b", "<time>", line))
            out.append(re.sub(r"^([WIEF])\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ ", r"\1<time> <pid> ", line))
    return out


# --- runs -----------------------------------------------------------------------------------
def run(cmd: list[str], env: dict[str, str], cwd: Path, timeout: float) -> dict[str, Any]:
    t = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, cwd=str(cwd), capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
        return {"rc": p.returncode, "stderr": p.stderr, "stdout": p.stdout, "s": time.monotonic() - t}
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return {"rc": None, "stderr": err, "stdout": "", "s": time.monotonic() - t}


class Runner:
    def __init__(self, work: Path, snapshot: Path, deps: Path, store_cache: Path, empty_cache: Path,
                 timeout: float) -> None:
        self.work, self.snapshot, self.deps, self.timeout = work, snapshot, deps, timeout
        self.caches = {"plugin-store": store_cache, "plugin-shipped": empty_cache, "without": empty_cache}
        self.vllm = str(venv_dir(VERSION) / "bin" / "vllm")

    def model(self, n: int, case: dict[str, Any]) -> list[str]:
        folder = self.work / "models" / str(n)
        if not folder.exists():
            write_model(folder, case)
        return place_model([str(a) for a in case["argv"]], str(folder))[0]

    def env(self, mode: str, case: dict[str, Any]) -> dict[str, str]:
        return kb_env(self.snapshot, self.deps, self.caches[mode], mode != "without", case.get("hardware") or {})

    def serve(self, n: int, case: dict[str, Any], mode: str) -> dict[str, Any]:
        return run([self.vllm, "serve", *self.model(n, case)], self.env(mode, case), self.work, self.timeout)

    def config_only(self, n: int, case: dict[str, Any], mode: str) -> dict[str, Any]:
        script = HERE / "inner" / "serve_config_only.py"
        return run([str(venv_python(VERSION)), str(script), *self.model(n, case)], self.env(mode, case), self.work,
                   self.timeout)


def judge_failing(case: dict[str, Any], runs: dict[str, dict[str, Any]],
                  labels: dict[tuple[str, int], tuple[str, str]]) -> dict[str, Any]:
    at = case["raised_at"]
    label = labels.get((at["file"], int(at["line"])))
    without = runs["without"]
    error = vllm_error(without["stderr"])
    out: dict[str, Any] = {"site": f"{at['file']}:{at['line']}", "error": error.splitlines()[0][:110] if error else "",
                           "rc": without["rc"], "s": {m: r["s"] for m, r in runs.items()}}
    if label is None or not template_regex(label[1]).search(" ".join(error.split())):
        out["expected"] = None  # the site is not one kb scans, or the message is not its template's
        return out
    out["expected"] = label[0]
    for mode in SOURCES:
        r = runs[mode]
        lines = r["stderr"].splitlines()
        ours = [i for i, line in enumerate(lines) if line.startswith(OURS)]
        first_ours = ours[0] if ours else len(lines)
        tail_is_ours = all(line.startswith(OURS) for line in lines[first_ours:])
        ids = [line[len(OURS):].split(" ", 1)[0] for line in lines if re.match(re.escape(OURS) + r"[0-9a-f]{16} ", line)]
        out[mode] = {
            "same_error": own_part(r["stderr"]) == own_part(without["stderr"]) and r["rc"] == without["rc"],
            "after": bool(ours) and tail_is_ours and first_ours > 0 and _TRACEBACK in "\n".join(lines[:first_ours]),
            "ids": ids, "right": bool(ids) and ids[0] == label[0], "lines": [lines[i] for i in ours]}
    return out


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> int:
    global VERSION
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default="0.34.0")
    ap.add_argument("--failing", type=int, default=24, help="failing launches (one per raise site)")
    ap.add_argument("--good", type=int, default=10, help="good launches")
    ap.add_argument("--serve", type=int, default=0, help="good launches through the whole `vllm serve` too")
    ap.add_argument("--jobs", type=int, default=1, help="failing launches run this many at a time")
    ap.add_argument("--timeout", type=float, default=400)
    ap.add_argument("--json", metavar="FILE", help="write every result (with our lines) here")
    args = ap.parse_args()
    VERSION = args.version
    if not venv_python(VERSION).exists():
        raise SystemExit(f"no oracle venv at {venv_dir(VERSION)}: run python3 {HERE / 'setup.py'} --version {VERSION}")
    deps = cache_root() / "kb-plugin" / "deps"
    install_dependencies(deps)
    store_cache = Path(os.environ.get("KB_CACHE_DIR") or cache_root() / "kb-plugin" / "cache")
    with tempfile.TemporaryDirectory(prefix="kb-plugin-", dir=str(cache_root())) as tmp:
        work = Path(tmp)
        snapshot = snapshot_kb(work / "snapshot")
        empty = work / "empty-cache"
        empty.mkdir()
        took = compile_store(snapshot, deps, store_cache)
        print(f"answer store of {VERSION} for this kb in {store_cache}: ready ({took:.1f} s)", flush=True)
        labels = site_labels()
        runner = Runner(work, snapshot, deps, store_cache, empty, args.timeout)
        cases = recorded_cases()
        failing, good = failing_cases(cases, args.failing), good_cases(cases, args.good)
        print(f"{len(failing)} failing launches (one per raise site), {len(good)} good launches", flush=True)
        results: dict[str, Any] = {"version": VERSION, "failing": [], "good": [], "serve": []}
        _registration(runner, results)

        def one_failing(item: tuple[int, dict[str, Any]]) -> dict[str, Any]:
            n, case = item
            runs = {mode: runner.serve(n, case, mode) for mode in ("without", *SOURCES)}
            judged = judge_failing(case, runs, labels)
            _print_failing(n, case, judged)
            return judged

        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            results["failing"] = list(pool.map(one_failing, enumerate(failing)))
        for i, case in enumerate(good):
            n = 1000 + i
            pair = {}
            for mode in (("without", "plugin-store") if i % 2 == 0 else ("plugin-store", "without")):
                pair[mode] = runner.config_only(n, case, mode)
            r = {"argv": case["argv"], "rc": {m: v["rc"] for m, v in pair.items()},
                 "ours": [line for v in pair.values() for line in v["stderr"].splitlines() if line.startswith(OURS)],
                 "s": {m: v["s"] for m, v in pair.items()}}
            results["good"].append(r)
            print(f"good {i + 1:2}: rc {r['rc']['without']}/{r['rc']['plugin-store']}, lines of ours: {len(r['ours'])}, "
                  f"{r['s']['without']:.1f} s without, {r['s']['plugin-store']:.1f} s with  {' '.join(case['argv'][1:])}",
                  flush=True)
        for i, case in enumerate(good_cases(cases, args.serve)):
            runs = {mode: runner.serve(2000 + i, case, mode.removesuffix("-again"))
                    for mode in ("without", "plugin-store", "without-again")}
            lines = {m: Counter(normalized(v["stderr"])) for m, v in runs.items()}
            r = {"argv": case["argv"], "rc": {m: v["rc"] for m, v in runs.items()},
                 "ours": [line for line in runs["plugin-store"]["stderr"].splitlines() if line.startswith(OURS)],
                 "errors": {m: vllm_error(v["stderr"]).splitlines()[:1] for m, v in runs.items()},
                 "lines": sum(lines["without"].values()),
                 "differing": {m: sorted(((lines["without"] - lines[m]) + (lines[m] - lines["without"])).elements())
                               for m in ("plugin-store", "without-again")},
                 "stderr": {m: v["stderr"] for m, v in runs.items()}, "s": {m: v["s"] for m, v in runs.items()}}
            results["serve"].append(r)
            print(f"whole serve {i + 1}: rc {r['rc']}; vLLM's last error {r['errors']}; of vLLM's {r['lines']} lines "
                  f"(pids and times aside, in any order: the processes interleave), differing from the first run "
                  f"without the plugin: {len(r['differing']['plugin-store'])} with it, "
                  f"{len(r['differing']['without-again'])} in a second run without it", flush=True)
            for m, diff in r["differing"].items():
                print(f"  {m}:", *[d[:150] for d in diff], sep="\n    ", flush=True)
            print("  ours:", *r["ours"], sep="\n    ", flush=True)
        _summary(results)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    return 0


def _registration(runner: Runner, results: dict[str, Any]) -> None:
    """What loading the plugin costs inside the venv: the entry point's import and `register()`,
    and the modules it adds (vLLM imported first, as when vLLM loads its plugins)."""
    code = ("import sys, time, json, vllm.plugins\n"
            "from importlib.metadata import entry_points\n"
            "ep = [e for e in entry_points(group='vllm.general_plugins') if e.name == sys.argv[1]][0]\n"
            "before = set(sys.modules)\n"
            "t = time.perf_counter(); ep.load()(); took = time.perf_counter() - t\n"
            "print(json.dumps({'ms': took * 1000, 'modules': sorted(set(sys.modules) - before)}))")
    env = runner.env("plugin-store", {})
    rows = []
    for _ in range(5):
        done = subprocess.run([str(venv_python(VERSION)), "-c", code, PLUGIN], env=env, capture_output=True, text=True,
                              check=True)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    results["registration"] = {"ms": median([r["ms"] for r in rows]), "modules": rows[0]["modules"]}
    print(f"loading the plugin (import + register, median of 5): {results['registration']['ms']:.2f} ms; "
          f"modules it adds: {', '.join(rows[0]['modules'])}", flush=True)


def _print_failing(n: int, case: dict[str, Any], j: dict[str, Any]) -> None:
    head = f"fail {n + 1:2} {j['site']:<44} expected {j['expected'] or '(unlabelled)'}"
    if j["expected"] is None:
        print(f"{head}: {j['error']}", flush=True)
        return
    verdicts = []
    for mode in SOURCES:
        m = j[mode]
        ok = m["same_error"] and m["after"] and m["right"]
        verdicts.append(f"{mode.removeprefix('plugin-')} {'ok' if ok else 'FAIL'}"
                        f"{'' if m['same_error'] else ' (vLLM output differs)'}{'' if m['after'] else ' (not after)'}"
                        f"{'' if m['right'] else ' (ids ' + ','.join(m['ids']) + ')'}")
    print(f"{head}: {'; '.join(verdicts)}  [{j['s']['without']:.1f}/{j['s']['plugin-store']:.1f}/"
          f"{j['s']['plugin-shipped']:.1f} s]  {j['error']}", flush=True)
    for line in j["plugin-store"]["lines"][:2]:
        print(f"      {line[:160]}", flush=True)


def _summary(results: dict[str, Any]) -> None:
    labelled = [j for j in results["failing"] if j["expected"]]
    print(f"\nfailing launches: {len(results['failing'])}, labelled from vLLM's output: {len(labelled)}")
    for mode in SOURCES:
        good = [j for j in labelled if j[mode]["same_error"] and j[mode]["after"] and j[mode]["right"]]
        same = sum(j[mode]["same_error"] for j in labelled)
        print(f"  {mode}: right id after vLLM's own error {len(good)}/{len(labelled)}; vLLM's output the same "
              f"{same}/{len(labelled)}")
    for mode in ("without", *SOURCES):
        print(f"  time to vLLM's error, {mode}: median {median([j['s'][mode] for j in results['failing']]):.2f} s")
    g = results["good"]
    quiet = sum(not r["ours"] for r in g)
    print(f"good launches: {len(g)}, with no line of ours: {quiet}/{len(g)}; exit codes "
          f"{sorted({(r['rc']['without'], r['rc']['plugin-store']) for r in g})}")
    without, with_ = median([r["s"]["without"] for r in g]), median([r["s"]["plugin-store"] for r in g])
    print(f"  time to the end of config building: median {without:.2f} s without the plugin, {with_:.2f} s with "
          f"(ratio {with_ / without:.3f})")


VERSION = "0.34.0"

if __name__ == "__main__":
    raise SystemExit(main())
