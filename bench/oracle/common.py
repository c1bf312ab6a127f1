"""Shared paths and the environment of an oracle run (no vLLM import here: this runs on any python)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DEFAULT_VERSION = "0.33.0"


def cache_root() -> Path:
    """The oracle's cache folder: $KB_ORACLE_CACHE, else ~/.cache/kb-oracle."""
    env = os.environ.get("KB_ORACLE_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kb-oracle"


def venv_dir(version: str = DEFAULT_VERSION) -> Path:
    """$KB_ORACLE_VENV, else <cache>/venv-<version>."""
    env = os.environ.get("KB_ORACLE_VENV")
    if env:
        return Path(env).expanduser()
    return cache_root() / f"venv-{version}"


def venv_python(version: str = DEFAULT_VERSION) -> Path:
    return venv_dir(version) / "bin" / "python"


def stub_dir(version: str = DEFAULT_VERSION) -> Path:
    """Where the stub libcuda.so.1 lives (inside the venv folder, so one venv has one stub)."""
    return venv_dir(version) / "kb-oracle-stub"


DEFAULT_HARDWARE = {
    "count": 8,
    "capability": "9.0",
    "memory_gib": 80,
    "name": "NVIDIA H100 80GB HBM3",
}


def oracle_env(hardware: dict | None = None, version: str = DEFAULT_VERSION,
               base: dict | None = None) -> dict:
    """The environment for a process that runs inside the oracle venv with the fake GPU.

    - the stub libcuda.so.1 first on LD_LIBRARY_PATH (only for these runs);
    - only our platform plugin loaded (VLLM_PLUGINS=fakegpu), so vLLM picks the fake CUDA platform;
    - FAKEGPU_* describe the hardware the plugin reports;
    - no network: Hugging Face hub offline, no usage stats.
    """
    hw = dict(DEFAULT_HARDWARE)
    hw.update(hardware or {})
    env = dict(os.environ if base is None else base)
    # Drop anything that would point the child at another python or another vLLM setup.
    for key in list(env):
        if key in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYENV_VERSION") or key.startswith("VLLM_"):
            env.pop(key)
    venv = venv_dir(version)
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    ld = [str(stub_dir(version))]
    if env.get("LD_LIBRARY_PATH"):
        ld.append(env["LD_LIBRARY_PATH"])
    env["LD_LIBRARY_PATH"] = os.pathsep.join(ld)
    env["VLLM_PLUGINS"] = "fakegpu"
    env["FAKEGPU_COUNT"] = str(hw["count"])
    env["FAKEGPU_CAPABILITY"] = str(hw["capability"])
    env["FAKEGPU_MEMORY_GIB"] = str(hw["memory_gib"])
    env["FAKEGPU_NAME"] = str(hw["name"])
    env["HF_HUB_OFFLINE"] = "1"
    env["TRANSFORMERS_OFFLINE"] = "1"
    env["HF_DATASETS_OFFLINE"] = "1"
    env["HF_HUB_DISABLE_TELEMETRY"] = "1"
    env["VLLM_NO_USAGE_STATS"] = "1"
    env["DO_NOT_TRACK"] = "1"
    env["TOKENIZERS_PARALLELISM"] = "false"
    env["PYTHONUNBUFFERED"] = "1"
    # vLLM logs to stdout by default; keep stdout for what the command itself prints.
    env["VLLM_LOGGING_STREAM"] = "ext://sys.stderr"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # If anything builds Triton's CUDA helper module, link it against the stub, not a real driver.
    env["TRITON_LIBCUDA_PATH"] = str(stub_dir(version))
    # Keep the child's caches out of the user's real ones.
    env.setdefault("VLLM_CACHE_ROOT", str(cache_root() / "vllm-cache"))
    env.setdefault("HF_HOME", str(cache_root() / "hf-home"))
    env.setdefault("TRITON_CACHE_DIR", str(cache_root() / "triton-cache"))
    return env


def recorded(name: str, version: str) -> list[dict[str, Any]]:
    """The cases already in tests/data/oracle-<name>-<version>.json (none when it is not there)."""
    out = REPO / "tests" / "data" / f"oracle-{name}-{version}.json"
    return json.loads(out.read_text())["cases"] if out.is_file() else []


def write_cases(name: str, version: str, cases: list[dict[str, Any]], script: str, **extra: Any) -> Path:
    """tests/data/oracle-<name>-<version>.json: the real outcomes the default tests compare kb with;
    prints how many, by the stage vLLM stopped at."""
    out = REPO / "tests" / "data" / f"oracle-{name}-{version}.json"
    doc = {"format": f"kb-oracle-{name}/1", "vllm": version, "cases": cases, **extra,
           "recorded_by": f"bench/oracle/{script} (real vLLM through bench/oracle/run_case.py, fake H100s)"}
    out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    stages: dict[str, int] = {}
    for c in cases:
        key = c.get("stage") or c.get("outcome") or "?"
        stages[key] = stages.get(key, 0) + 1
    print(f"{len(cases)} cases -> {out}: {stages}")
    return out


def run_one(case: dict[str, Any], version: str) -> dict[str, Any]:
    """One case (argv, config, hardware) through run_case.py: the outcome, stage, exception,
    message and where vLLM raised it."""
    done = subprocess.run([sys.executable, str(HERE / "run_case.py"), "--version", version], input=json.dumps(case),
                          capture_output=True, text=True, check=True)
    result = json.loads(done.stdout)
    return {"argv": case["argv"], "outcome": result.get("outcome"), "stage": result.get("stage"),
            "exception": result.get("exception"), "message": result.get("message"),
            "raised_at": result.get("raised_at")}


def run_all(cases: Sequence[dict[str, Any]], version: str, jobs: int, kept: Sequence[str] = (),
            prepare: Callable[[dict[str, Any]], dict[str, Any]] = lambda c: c) -> list[dict[str, Any]]:
    """Every case through the real vLLM, `jobs` at a time, in order: each record with the case's
    `kept` keys (model, config, hardware) beside the outcome; `prepare` makes what run_case.py reads."""
    with ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(lambda c: {**run_one(prepare(c), version), **{k: c[k] for k in kept}}, cases))


def distinct(draw: Callable[[], dict[str, Any]], count: int,
             known: Collection[str] = frozenset()) -> list[dict[str, Any]]:
    """`count` cases from `draw`, none twice (by model, words and hardware) nor one of `known`."""
    out: list[dict[str, Any]] = []
    seen = set(known)
    while len(out) < count:
        case = draw()
        key = case_key(case)
        if key not in seen:
            seen.add(key)
            out.append(case)
    return out


def case_key(case: dict[str, Any]) -> str:
    return json.dumps([case.get("model"), case["argv"], case.get("hardware")])
