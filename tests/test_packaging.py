"""`pip install .` ships templates/ and errors/ inside the package: `kb build` works anywhere."""

from __future__ import annotations

import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from fixture_tree import tree_files, write_tree

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                           str(ROOT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    (whl,) = out.glob("*.whl")
    return whl


def tracked(folder: str) -> set[str]:
    names = subprocess.run(["git", "ls-files", folder], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return {n for n in names if (ROOT / n).is_file()}


def test_wheel_carries_templates_and_curated_entries(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    templates = tracked("templates")
    assert templates, "templates/ is empty"
    assert {"kb/" + t for t in templates} <= names
    assert {"kb/curated/" + e.removeprefix("errors/") for e in tracked("errors")} <= names
    assert {"kb/schemas/scan.schema.json", "kb/schemas/record.schema.json"} <= names
    # the MCP registry's entry and the agents' usage note beside the server, the MkDocs plugin's stylesheet
    assert {"kb/agent/server.json", "kb/agent/SKILL.md", "kb/mkdocs/errors.css"} <= names
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    assert "vllm-error-kb = kb.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()  # uvx vllm-error-kb mcp


def test_installed_kb_builds_from_another_folder(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=False, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    # kb's dependencies come from the environment running the tests (a venv or not): its
    # site-packages go after the new venv's own, so the wheel installed below is found first.
    own = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    Path(own, "outer-site.pth").write_text("".join(p + "\n" for p in site.getsitepackages()))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--ignore-installed", "-q", str(wheel)]
                   if _pip_has_python_option() else [str(python), "-m", "pip", "install", "--no-deps", "--ignore-installed", "-q", str(wheel)],
                   check=True, capture_output=True)
    tree = write_tree(tmp_path / "tree", tree_files("0.1.0", broken=False))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = subprocess.run([str(python), "-c", "import kb, kb.paths; print(kb.__file__); print(kb.paths.data_dir('templates'))"],
                           cwd=elsewhere, capture_output=True, text=True, check=True).stdout.split("\n")
    assert str(env_dir) in where[0] and str(env_dir) in where[1]
    proc = subprocess.run([str(python), "-m", "kb", "build", "--source", str(tree), "-o", "out", "--quiet"],
                          cwd=elsewhere, capture_output=True, text=True,
                          env={"KB_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert (elsewhere / "out/errors/d97d5d8528e2b364/index.html").is_file()
    assert (elsewhere / "out/contribute/index.html").is_file()


def _pip_has_python_option() -> bool:
    out = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True).stdout
    major, minor = (int(x) for x in out.split()[1].split(".")[:2])
    return (major, minor) >= (22, 3)


def test_the_pages_workflow_builds_with_options_kb_takes() -> None:
    """examples/github-pages.yml: valid YAML; its `kb build` (the pinned site) and `kb release` (a
    newer vLLM: a pull request with the worklist, never a published site) parse with kb's own CLI."""
    import shlex

    import yaml

    from kb.cli import parser

    flow = yaml.safe_load((Path(__file__).resolve().parent.parent / "examples" / "github-pages.yml").read_text())

    def command(job: str, name: str) -> list[str]:
        script = next(s["run"] for s in flow["jobs"][job]["steps"] if name in s.get("run", ""))
        text = " ".join(line.rstrip("\\ ") for line in script.splitlines() if line.strip())
        text = text[text.index(name):].replace("${{ needs.newest.outputs.version }}", "0.35.0")
        return shlex.split(text.split(">")[0].split(";")[0])

    args = parser().parse_args(command("build", "kb build")[1:])
    assert args.vllm_version is None and args.output == "site"  # the pinned release
    bump = parser().parse_args(command("bump", "kb release")[1:])
    assert bump.version == "0.35.0" and bump.markdown and not bump.dry_run
    assert any(s.get("uses", "").startswith("peter-evans/create-pull-request") for s in flow["jobs"]["bump"]["steps"])
    assert not any("deploy-pages" in s.get("uses", "") for s in flow["jobs"]["bump"]["steps"])
    steps = flow["jobs"]["build"]["steps"]
    assert any(s.get("uses", "").startswith("actions/deploy-pages") for s in steps)
