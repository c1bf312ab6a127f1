"""Every shipped entry's defensive snippet runs as a script: `python -I` in a subprocess, in an
empty folder, exits 0. The rule (errors/README.md): standard-library imports at the top, any
other import inside the function that needs it, no `sys.exit`, no file or network access at
import; a snippet may call its functions on literal sample data."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kb.entries.yamldata import YamlProblem, read_yaml
from kb.paths import data_dir

TIMEOUT = 20  # seconds; a snippet defines functions and runs a few on sample data
_NETWORK_VARS = ("proxy", "ssl_cert", "requests_ca", "curl_ca", "pip_index", "pip_extra_index", "hf_", "huggingface")


def snippets() -> list[tuple[str, str]]:
    """(errors/<file>, code) of every entry with `defensive.code`; a file that is not valid YAML is
    test_curated's to report."""
    out = []
    for path in sorted(data_dir("errors").glob("*.yaml")):
        try:
            data, _ = read_yaml(path.read_text(encoding="utf-8"))
        except (YamlProblem, UnicodeDecodeError):
            continue
        defensive = data.get("defensive") if isinstance(data, dict) else None
        code = defensive.get("code") if isinstance(defensive, dict) else None
        if isinstance(code, str):
            out.append((f"errors/{path.name}", code))
    return out


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not any(w in k.lower() for w in _NETWORK_VARS)}


SNIPPETS = snippets()


def test_snippets_are_found() -> None:
    assert len(SNIPPETS) >= 40


@pytest.mark.parametrize("name, code", SNIPPETS, ids=[name for name, _ in SNIPPETS])
def test_defensive_snippet_runs(tmp_path: Path, name: str, code: str) -> None:
    script = tmp_path / "snippet.py"
    script.write_text(code, encoding="utf-8")
    try:
        done = subprocess.run([sys.executable, "-I", str(script)], cwd=tmp_path, env=_env(), capture_output=True,
                              text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{name}: defensive.code did not finish in {TIMEOUT} s")
    tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
    assert done.returncode == 0, f"{name}: defensive.code exits {done.returncode} under `python -I`:\n{tail}"
