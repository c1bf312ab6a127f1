"""vLLM's environment variables, read from vllm/envs.py: the `environment_variables` table of
getters (each run by the reader in an empty environment for its default), the types of the
`if TYPE_CHECKING:` declarations, and the comment block above each entry (its doc, as vLLM's
docs show it)."""

from __future__ import annotations

import ast
import re
from typing import Any, Optional

from kb.config.interp import Reader
from kb.config.lookup import MAX_STEPS
from kb.config.modules import Module
from kb.config.refs import Budget, Frame
from kb.config.values import Unknown, plain, source_text
from kb.configmodel import EnvVar

ENVS_MODULE = "vllm.envs"
MAX_ENV_VARS = 5_000
MAX_DOC_LINES = 200
GETTER_STEPS = 50_000  # the reader's steps one getter may take
TOTAL_STEPS = 2_000_000  # and all of them together
_HEADING = re.compile(r"^=+[^=]*=+$")  # `# ======== Runtime Env Vars ========`


def read_envs(reader: Reader) -> list[EnvVar]:
    module = reader.modules.get(ENVS_MODULE)
    if module is None:
        return []
    table = _table(module)
    if table is None:
        reader.warn(module, 1, "no `environment_variables` table in vllm/envs.py")
        return []
    types = declared_types(module.tree)
    lines = _source_lines(reader, module)
    out: dict[str, EnvVar] = {}
    spent = 0
    for key, value in zip(table.keys, table.values):
        if len(out) >= MAX_ENV_VARS:
            reader.warn(module, key or table, f"more than {MAX_ENV_VARS} environment variables: the rest not read")
            break
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            continue
        name = key.value  # a key given twice: its last getter, as in a dict display
        default: Any = Unknown(source_text(value))
        if spent < TOTAL_STEPS:
            reader.steps = MAX_STEPS - GETTER_STEPS  # each getter gets a budget of its own
            reader.unfollowed = 0
            try:
                default = _default(reader, module, value)
            except Budget:
                reader.warn(module, key, f"{name}: default not read: more than {GETTER_STEPS} steps")
            if reader.unfollowed:  # a `while`, `raise`, `match` on the way: the value would be a guess
                default = Unknown(source_text(value))
            spent += reader.steps - (MAX_STEPS - GETTER_STEPS)
            if spent >= TOTAL_STEPS:
                reader.warn(module, key, f"defaults after {name} not read: more than {TOTAL_STEPS} steps in all")
        shown, exact = plain(default)
        known = not isinstance(default, Unknown)
        out[name] = EnvVar(name, types.get(name), shown if known else source_text(value), exact and known, known,
                           comment_above(lines, key.lineno), module.path, key.lineno)
    return sorted(out.values(), key=lambda e: e.name)


def _table(module: Module) -> Optional[ast.Dict]:
    for stmt in module.tree.body:
        target: Optional[ast.expr] = None
        if isinstance(stmt, ast.AnnAssign):
            target, value = stmt.target, stmt.value
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        if isinstance(target, ast.Name) and target.id == "environment_variables" and isinstance(value, ast.Dict):
            return value
    return None


def declared_types(tree: ast.Module) -> dict[str, str]:
    """`NAME: type = ...` inside the module's `if TYPE_CHECKING:` blocks."""
    types: dict[str, str] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.If) and _is_type_checking(stmt.test):
            for inner in stmt.body:
                if isinstance(inner, ast.AnnAssign) and isinstance(inner.target, ast.Name):
                    types.setdefault(inner.target.id, source_text(inner.annotation))
    return types


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _default(reader: Reader, module: Module, getter: ast.expr) -> Any:
    try:
        func = reader.eval(getter, Frame(module))
        if isinstance(func, Unknown):
            return func
        return reader.call(func, [], {}, Frame(module), getter)
    except RecursionError:
        return Unknown(source_text(getter))


def _source_lines(reader: Reader, module: Module) -> list[str]:
    try:
        return reader.modules.read(module.path).decode("utf-8", "replace").splitlines()
    except (OSError, KeyError, ValueError):
        return []


def comment_above(lines: list[str], lineno: int) -> str:
    """The `#` lines right above line `lineno` (1-based), without their `#`, section headings
    left out; paragraphs as vLLM's docs join them (one line per comment line)."""
    block: list[str] = []
    i = lineno - 2
    while i >= 0 and len(block) < MAX_DOC_LINES:
        text = lines[i].strip()
        if not text.startswith("#"):
            break
        block.append(text[1:].strip())
        i -= 1
    block.reverse()
    return "\n".join(b for b in block if not _HEADING.match(b)).strip()

