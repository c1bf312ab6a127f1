#!/usr/bin/env python3
"""Set up the real-vLLM oracle: a cached venv with vllm==VERSION, the fake-GPU plugin, a stub libcuda.

    python3 bench/oracle/setup.py [--version 0.33.0] [--venv DIR] [--python PY] [--ignore-pip-config]

Idempotent: every step checks first and is skipped when already done.

1. a venv (default ~/.cache/kb-oracle/venv-<version>; $KB_ORACLE_VENV or --venv overrides);
2. ``pip install vllm==<version>`` from the package index, with its dependencies (torch etc.);
3. the plugin package bench/oracle/fakegpu (a vLLM platform plugin and a Triton backend), installed
   as a copy (not editable, so the venv does not depend on where this repo is checked out);
   re-installed whenever its sources change;
4. a stub ``libcuda.so.1`` in <venv>/kb-oracle-stub/, compiled with gcc from C generated here:
   every CUDA driver entry point (``cu[A-Z]*``) that the venv's ELF files linking libcuda.so.1 leave
   undefined, each answering CUDA_ERROR_NO_DEVICE (100), except cuDriverGetVersion (a version,
   success), cuDeviceGetCount (0 devices, success) and cuGetErrorString/cuGetErrorName
   (a message, success). Only oracle runs put it on LD_LIBRARY_PATH (bench/oracle/common.py).

It never imports vLLM in this process: everything about the venv is asked of the venv's python.
A summary goes to <venv>/kb-oracle.json (versions, stubbed symbols, timings).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DEFAULT_VERSION, HERE, stub_dir, venv_dir  # noqa: E402

PLUGIN_DIR = HERE / "fakegpu"
MANIFEST = "kb-oracle.json"
CUDA_ERROR_NO_DEVICE = 100
DRIVER_SYMBOL = re.compile(r"^cu[A-Z]\w*$")
LIBCUDA_FILE = re.compile(r"^libcuda[-.]")


def log(msg: str) -> None:
    print(f"[oracle-setup] {msg}", flush=True)


def run(cmd: list[str], env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    log("$ " + " ".join(str(c) for c in cmd))
    return subprocess.run([str(c) for c in cmd], check=True, env=env, **kw)


def pip_env(ignore_pip_config: bool) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    if ignore_pip_config:
        # A machine-wide pip config may cap torch; vllm pins its own torch. /dev/null = no config files.
        env["PIP_CONFIG_FILE"] = os.devnull
    return env


def installed_version(python: Path, dist: str) -> str | None:
    code = ("import importlib.metadata as m, sys\n"
            "try: print(m.version(sys.argv[1]))\n"
            "except m.PackageNotFoundError: pass\n")
    out = subprocess.run([str(python), "-c", code, dist], capture_output=True, text=True)
    return out.stdout.strip() or None


def site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def tree_hash(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and ".egg-info" not in str(p) and "build" not in p.parts:
            h.update(str(p.relative_to(folder)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


# ---------------------------------------------------------------- steps

def ensure_venv(venv: Path, python: str) -> Path:
    py = venv / "bin" / "python"
    if py.exists():
        log(f"venv present: {venv}")
        return py
    venv.parent.mkdir(parents=True, exist_ok=True)
    run([python, "-m", "venv", venv])
    run([py, "-m", "pip", "install", "-q", "-U", "pip"], env=pip_env(False))
    return py


def ensure_vllm(py: Path, version: str, ignore_pip_config: bool) -> bool:
    have = installed_version(py, "vllm")
    if have == version:
        log(f"vllm {have} present")
        return False
    run([py, "-m", "pip", "install", f"vllm=={version}"], env=pip_env(ignore_pip_config))
    return True


def ensure_plugin(py: Path, venv: Path, ignore_pip_config: bool) -> bool:
    marker = venv / "kb-oracle-fakegpu.hash"
    digest = tree_hash(PLUGIN_DIR)
    if marker.exists() and marker.read_text().strip() == digest and installed_version(py, "kb-oracle-fakegpu"):
        log(f"fakegpu plugin present ({digest})")
        return False
    # Build from a scratch copy so no build/ or egg-info lands in the repo.
    scratch = venv / "kb-oracle-build" / "fakegpu"
    if scratch.exists():
        shutil.rmtree(scratch)
    shutil.copytree(PLUGIN_DIR, scratch, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--force-reinstall", scratch],
        env=pip_env(ignore_pip_config))
    marker.write_text(digest + "\n")
    return True


def _elf_needed(path: Path) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True)
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out.stdout)


def _dyn_symbols(path: Path, defined: bool) -> set[str]:
    flag = "--defined-only" if defined else "--undefined-only"
    out = subprocess.run(["nm", "-D", flag, str(path)], capture_output=True, text=True)
    syms = set()
    for line in out.stdout.splitlines():
        parts = line.split()
        if parts:
            syms.add(parts[-1].split("@")[0])
    return syms


def _is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def scan_driver_symbols(site: Path) -> tuple[list[str], list[str]]:
    """(the driver entry points to stub, the ELF files that link libcuda.so.1), relative to site.

    The entry points are the ``cu[A-Z]*`` names that a file linking libcuda.so.1 leaves undefined,
    less any that another library it links (found in the venv by file name) defines itself.
    """
    by_name: dict[str, list[Path]] = {}
    users: list[tuple[Path, list[str]]] = []
    for path in sorted(site.rglob("*.so*")):
        # Skip libcuda itself, also copies that wheels vendor (PyNvVideoCodec ships libcuda-<hash>.so).
        if not path.is_file() or not _is_elf(path) or LIBCUDA_FILE.match(path.name):
            continue
        by_name.setdefault(path.name, []).append(path)
        if path.is_symlink():
            continue
        needed = _elf_needed(path)
        if any(LIBCUDA_FILE.match(n) for n in needed):
            users.append((path, needed))
    wanted: set[str] = set()
    for path, needed in users:
        undefined = {s for s in _dyn_symbols(path, defined=False) if DRIVER_SYMBOL.match(s)}
        for name in needed:
            for sibling in by_name.get(name, []):
                undefined -= _dyn_symbols(sibling, defined=True)
        wanted |= undefined
    # Entry points the CUDA runtime (libcudart, which dlopens libcuda.so.1) looks up first.
    wanted |= {"cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuGetProcAddress", "cuGetProcAddress_v2",
               "cuGetErrorString", "cuGetErrorName", "cuGetExportTable"}
    return sorted(wanted), sorted(str(p.relative_to(site)) for p, _ in users)


def cuda_driver_version(site: Path) -> int:
    """The CUDA version torch was built for, as the driver API encodes it (13.0 -> 13000)."""
    text = (site / "torch" / "version.py").read_text() if (site / "torch" / "version.py").exists() else ""
    m = re.search(r"^cuda\s*(?::\s*\w+(?:\[\w+\])?)?\s*=\s*'(\d+)\.(\d+)", text, re.M)
    return int(m.group(1)) * 1000 + int(m.group(2)) * 10 if m else 13000


def stub_source(symbols: list[str], driver_version: int) -> str:
    special = {
        "cuInit": "int cuInit(unsigned int flags) { (void)flags; return CUDA_ERROR_NO_DEVICE; }",
        "cuDriverGetVersion":
            f"int cuDriverGetVersion(int *v) {{ if (!v) return 1; *v = {driver_version}; return 0; }}",
        "cuDeviceGetCount": "int cuDeviceGetCount(int *n) { if (!n) return 1; *n = 0; return 0; }",
        "cuGetErrorString":
            "int cuGetErrorString(int e, const char **s) { (void)e; if (!s) return 1; "
            "*s = \"no CUDA-capable device is detected (kb-oracle stub libcuda)\"; return 0; }",
        "cuGetErrorName":
            "int cuGetErrorName(int e, const char **s) { (void)e; if (!s) return 1; "
            "*s = \"CUDA_ERROR_NO_DEVICE\"; return 0; }",
    }
    lines = [
        "/* Generated by bench/oracle/setup.py: a stub CUDA driver for a machine without a GPU.",
        " * Every entry point answers CUDA_ERROR_NO_DEVICE except the few special-cased below. */",
        f"#define CUDA_ERROR_NO_DEVICE {CUDA_ERROR_NO_DEVICE}",
        "",
    ]
    for sym in symbols:
        lines.append(special.get(sym, f"int {sym}(void) {{ return CUDA_ERROR_NO_DEVICE; }}"))
    return "\n".join(lines) + "\n"


def ensure_stub(py: Path, version: str, rescan: bool = False) -> dict:
    site = site_packages(py)
    out_dir = stub_dir(version)
    lib = out_dir / "libcuda.so.1"
    # The scan (readelf/nm over every shared object in the venv) is redone only when what is
    # installed changed: the key is the installed distributions and their versions.
    key = hashlib.sha256(subprocess.run(
        [str(py), "-c", "import importlib.metadata as m; print(sorted((d.metadata['Name'] or '', d.version) "
                        "for d in m.distributions()))"],
        capture_output=True, text=True, check=True).stdout.encode()).hexdigest()[:16]
    scan_file = out_dir / "scan.json"
    if not rescan and lib.exists() and scan_file.exists():
        cached = json.loads(scan_file.read_text())
        if cached.get("key") == key:
            log(f"stub libcuda.so.1 present ({len(cached['symbols'])} entry points, installed set unchanged)")
            return {"libcuda": str(lib), "symbols": cached["symbols"], "linked_by": cached["linked_by"]}
    symbols, users = scan_driver_symbols(site)
    src = stub_source(symbols, cuda_driver_version(site))
    digest = hashlib.sha256(src.encode()).hexdigest()[:16]
    marker = out_dir / "libcuda.hash"
    if lib.exists() and marker.exists() and marker.read_text().strip() == digest:
        log(f"stub libcuda.so.1 present ({len(symbols)} entry points)")
    else:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "libcuda_stub.c").write_text(src)
        run(["gcc", "-shared", "-fPIC", "-O1", "-Wl,-soname,libcuda.so.1", "-o", lib, out_dir / "libcuda_stub.c"])
        marker.write_text(digest + "\n")
    # Some loaders ask for the unversioned name.
    alias = out_dir / "libcuda.so"
    if not alias.exists():
        alias.symlink_to("libcuda.so.1")
    scan_file.write_text(json.dumps({"key": key, "symbols": symbols, "linked_by": users}, indent=1) + "\n")
    return {"libcuda": str(lib), "symbols": symbols, "linked_by": users}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", default=DEFAULT_VERSION, help="vLLM release (default %(default)s)")
    ap.add_argument("--venv", help="venv folder (default $KB_ORACLE_VENV or ~/.cache/kb-oracle/venv-<version>)")
    ap.add_argument("--python", default=sys.executable, help="interpreter for a new venv (default: this one)")
    ap.add_argument("--ignore-pip-config", action="store_true",
                    help="install with PIP_CONFIG_FILE=/dev/null (when a machine-wide pip constraint caps torch "
                         "below what vllm pins)")
    ap.add_argument("--rescan", action="store_true", help="redo the libcuda symbol scan even if nothing changed")
    args = ap.parse_args(argv)
    if args.venv:
        os.environ["KB_ORACLE_VENV"] = str(Path(args.venv).expanduser().resolve())
    venv = venv_dir(args.version)
    timings = {}

    t = time.monotonic()
    py = ensure_venv(venv, args.python)
    timings["venv_s"] = round(time.monotonic() - t, 1)
    t = time.monotonic()
    ensure_vllm(py, args.version, args.ignore_pip_config)
    timings["vllm_install_s"] = round(time.monotonic() - t, 1)
    t = time.monotonic()
    ensure_plugin(py, venv, args.ignore_pip_config)
    timings["plugin_s"] = round(time.monotonic() - t, 1)
    t = time.monotonic()
    stub = ensure_stub(py, args.version, args.rescan)
    timings["stub_s"] = round(time.monotonic() - t, 1)

    manifest = {
        "vllm_version": installed_version(py, "vllm"),
        "torch_version": installed_version(py, "torch"),
        "triton_version": installed_version(py, "triton"),
        "python": subprocess.run([str(py), "-c", "import sys; print(sys.version.split()[0])"],
                                 capture_output=True, text=True).stdout.strip(),
        "venv": str(venv),
        "stub": stub,
        "last_setup_timings": timings,
    }
    (venv / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    log(f"ready: {venv} (vllm {manifest['vllm_version']}, torch {manifest['torch_version']}, "
        f"{len(stub['symbols'])} stubbed driver entry points); timings {timings}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
