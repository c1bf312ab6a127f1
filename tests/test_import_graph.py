"""kb's import graph: no cycles, and the stages import one way only, the earlier never the later.

Every import counts, wherever it is written: at the top, under `if TYPE_CHECKING:`, inside a
function (a lazy import that goes up the stage order is a dependency all the same). The graph is
read with `ast`, nothing is imported. A new module of kb needs a place in LAYERS (README, "Layout").
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path

KB = Path(__file__).resolve().parent.parent / "kb"

# The stages, earliest first: a module may import its own layer and those above it in this list.
# Within a layer, modules may import each other as long as no cycle forms.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # the data that crosses stages and the helpers every stage uses; they know no stage
    ("foundation", ("kb.errors", "kb.paths", "kb.files", "kb.urls", "kb.hardware", "kb.workers", "kb.stages",
                    "kb.store", "kb.configmodel", "kb.setby", "kb.derivedmodel", "kb.model")),
    ("scan", ("kb.scan",)),
    ("config", ("kb.config",)),
    ("checks/fit", ("kb.checks", "kb.fit")),
    ("entries", ("kb.entries",)),
    ("releases", ("kb.releases",)),
    ("records", ("kb.records",)),
    ("derived", ("kb.derived",)),
    ("explain/search", ("kb.explain", "kb.search")),
    ("site", ("kb.site",)),
    ("jobs", ("kb.jobs", "kb")),  # `kb`: the package's public API, kb/__init__.py
    # what runs whole jobs for a caller: the MkDocs plugin, the MCP server, the vLLM plugin
    ("front ends", ("kb.mkdocs", "kb.agent", "kb.vllm_plugin")),
    ("cli", ("kb.cli", "kb.__main__")),
)


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the module of kb it reaches (the longest one the import names)
    path: Path
    line: int
    lazy: bool  # inside a function

    def where(self, root: Path) -> str:
        return f"{self.path.relative_to(root.parent).as_posix()}:{self.line}"


def modules(package: Path) -> dict[str, Path]:
    """Every module of the package, by dotted name (a package by its own name)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _functions_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def imports(package: Path) -> list[Import]:
    """Every import between modules of the package: top-level, TYPE_CHECKING and lazy ones."""
    mods = modules(package)
    top = package.name

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    out = []
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        inside = _functions_lines(tree)
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - node.level + 1]
                    module = ".".join([*base, node.module] if node.module else base)
                else:
                    module = node.module or ""
                targets = [f"{module}.{a.name}" for a in node.names]
            for t in targets:
                if t != top and not t.startswith(top + "."):
                    continue
                target = resolve(t)
                if target is not None and target != name:
                    out.append(Import(name, target, path, node.lineno, node.lineno in inside))
    return sorted(set(out), key=lambda i: (i.source, i.line, i.target))


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (length of the prefix, layer)
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            covers = module == p or (p != "kb" and module.startswith(p + "."))
            if covers and (best is None or len(p) > best[0]):
                best = (len(p), i)
    return best[1] if best is not None else None


def upward(found: list[Import], root: Path) -> list[str]:
    """Each import of a later stage by an earlier one, located."""
    order = " -> ".join(name for name, _ in LAYERS)
    out = []
    for i in found:
        src, dst = layer_of(i.source), layer_of(i.target)
        if src is not None and dst is not None and dst > src:
            out.append(f"{i.where(root)}: {i.source} ({LAYERS[src][0]}) imports {i.target} ({LAYERS[dst][0]}), "
                       f"a later stage{' (lazily)' if i.lazy else ''}; the stages run {order}")
    return out


def _deferred(i: Import) -> bool:
    """A package's __init__ loading one of its own modules when called (`register()` of a plugin
    importing its hooks): Python runs the package before any of its modules, so this is how a
    package defers its own modules, not a dependency that could run in a circle."""
    return i.lazy and i.target.startswith(i.source + ".") and i.path.name == "__init__.py"


def cycles(found: list[Import], root: Path) -> list[str]:
    """One cycle of each strongly connected group of modules, each import located."""
    edges: dict[str, list[Import]] = {}
    for i in found:
        if not _deferred(i):
            edges.setdefault(i.source, []).append(i)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    groups: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for e in edges.get(v, []):
            if e.target not in index:
                visit(e.target)
                low[v] = min(low[v], low[e.target])
            elif e.target in on:
                low[v] = min(low[v], index[e.target])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    out = []
    for group in groups:
        start = min(group)
        # the shortest way round from `start` and back, inside the group
        paths: dict[str, list[Import]] = {start: []}
        queue = [start]
        loop: list[Import] = []
        while queue and not loop:
            v = queue.pop(0)
            for e in edges.get(v, []):
                if e.target == start:
                    loop = [*paths[v], e]
                    break
                if e.target in group and e.target not in paths:
                    paths[e.target] = [*paths[v], e]
                    queue.append(e.target)
        steps = " -> ".join(f"{e.target} ({e.where(root)}{', lazily' if e.lazy else ''})" for e in loop)
        out.append(f"import cycle: {start} -> {steps}")
    return out


def test_every_module_of_kb_has_a_stage() -> None:
    assert [m for m in modules(KB) if layer_of(m) is None] == [], "give each a place in LAYERS (and README's Layout)"


def test_the_stages_import_one_way() -> None:
    assert upward(imports(KB), KB) == []


def test_no_import_cycles() -> None:
    assert cycles(imports(KB), KB) == []


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "kb"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def test_type_checking_and_lazy_imports_count(tmp_path: Path) -> None:
    """The checks see an import under TYPE_CHECKING and one inside a function, relative ones too."""
    root = _package(tmp_path, {
        "__init__.py": "",
        "model.py": """\
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from kb.config.model import ConfigModel
            """,
        "scan/__init__.py": "",
        "scan/extract.py": """\
            def site():
                from kb.model import Record
            """,
        "config/__init__.py": "",
        "config/model.py": "from ..scan import extract\n",
    })
    found = imports(root)
    assert upward(found, root) == [
        "kb/model.py:3: kb.model (foundation) imports kb.config.model (config), a later stage; the stages run "
        + " -> ".join(name for name, _ in LAYERS)]
    assert cycles(found, root) == [
        "import cycle: kb.config.model -> kb.scan.extract (kb/config/model.py:1) -> "
        "kb.model (kb/scan/extract.py:2, lazily) -> kb.config.model (kb/model.py:3)"]


def test_a_package_may_defer_its_own_modules(tmp_path: Path) -> None:
    """A plugin's `register()` importing its hooks when called is no cycle; the same import at the
    top of the package is one."""
    files = {"__init__.py": "", "agent/hooks.py": "from kb.agent import OFF\n"}
    lazy = _package(tmp_path / "a", {**files, "agent/__init__.py": "OFF = 0\ndef register():\n    from kb.agent import hooks\n"})
    eager = _package(tmp_path / "b", {**files, "agent/__init__.py": "from kb.agent import hooks\nOFF = 0\n"})
    assert cycles(imports(lazy), lazy) == []
    assert cycles(imports(eager), eager) == [
        "import cycle: kb.agent -> kb.agent.hooks (kb/agent/__init__.py:1) -> kb.agent (kb/agent/hooks.py:1)"]
