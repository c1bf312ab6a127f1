"""The reader's statements: a function body run statement by statement (assignments, ifs whose
unknown test runs both branches, loops over known values, returns), within the step budget."""

from __future__ import annotations

import ast
from typing import Any, Optional

from kb.config.expressions import Expressions
from kb.config.lookup import MAX_LOOP, PLAIN, VALUE_ERRORS, VALUES, Return, source_text
from kb.config.refs import Frame, FunctionRef
from kb.config.values import (
    MAX_ITEMS,
    Builtin,
    ModuleRef,
    Unknown,
    bounded,
)


class Statements(Expressions):
    def run(self, body: list[ast.stmt], frame: Frame) -> None:
        for stmt in body:
            self.step()
            try:
                self.statement(stmt, frame)
            except VALUE_ERRORS:
                continue
            except RecursionError:
                self.warn(frame.module, stmt, "not read: nested too deeply")

    def statement(self, stmt: ast.stmt, frame: Frame) -> None:
        if isinstance(stmt, ast.Expr):
            self.eval(stmt.value, frame)
        elif isinstance(stmt, ast.Assign):
            value = self.eval(stmt.value, frame)
            for target in stmt.targets:
                self.assign(target, value, frame)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            self.assign(stmt.target, self.eval(stmt.value, frame), frame)
        elif isinstance(stmt, ast.AugAssign):
            load = _as_load(stmt.target)
            if load is not None:
                current = self.eval(load, frame)
                value = self.binop(ast.BinOp(load, stmt.op, stmt.value), current, self.eval(stmt.value, frame))
                self.assign(stmt.target, bounded(value), frame)
        elif isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                if isinstance(target, ast.Subscript):
                    container = self.eval(target.value, frame)
                    key = self.eval(target.slice, frame)
                    if isinstance(container, dict) and isinstance(key, PLAIN):
                        container.pop(key, None)
        elif isinstance(stmt, ast.If):
            test = self.eval(stmt.test, frame)
            if isinstance(test, VALUES):
                self.run(stmt.body if test else stmt.orelse, frame)
            else:
                self.run(stmt.body, frame)
                self.run(stmt.orelse, frame)
        elif isinstance(stmt, ast.For):
            self.loop(stmt, frame)
        elif isinstance(stmt, ast.Try):
            self.run(stmt.body, frame)
            self.run(stmt.orelse, frame)
            self.run(stmt.finalbody, frame)
        elif isinstance(stmt, ast.With):
            self.run(stmt.body, frame)
        elif isinstance(stmt, ast.Return):
            raise Return(self.eval(stmt.value, frame) if stmt.value is not None else None)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            frame.locals[stmt.name] = FunctionRef(frame.module, stmt, frame.cls, frame.owner,
                                                  closure=frame.locals)
        elif isinstance(stmt, ast.ImportFrom):
            from kb.config.modules import _absolute

            source = _absolute(frame.module.name, stmt.level, stmt.module, frame.module.path.endswith("__init__.py"))
            imported = self.modules.get(source)
            for alias in stmt.names:
                found = self.modules.lookup(imported, alias.name) if imported is not None else None
                frame.locals[alias.asname or alias.name] = (self.found_value(found) if found is not None
                                                            else Builtin(f"{source}.{alias.name}"))
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                frame.locals[alias.asname or alias.name.split(".")[0]] = ModuleRef(
                    alias.name if alias.asname else alias.name.split(".")[0])
        elif isinstance(stmt, (ast.While, ast.Raise, ast.Assert, ast.Break, ast.Continue, ast.AsyncFor,
                               ast.AsyncWith)) or type(stmt).__name__ in ("Match", "TryStar"):
            self.unfollowed += 1  # reached, not followed: what comes after may not be what Python does

    def loop(self, stmt: ast.For, frame: Frame) -> None:
        items = self.iterate(self.eval(stmt.iter, frame))
        if items is None:
            return
        for item in items[:MAX_LOOP]:
            self.assign(stmt.target, item, frame)
            self.run(stmt.body, frame)

    def assign(self, target: ast.expr, value: Any, frame: Frame) -> None:
        if isinstance(target, ast.Name):
            frame.locals[target.id] = value
        elif isinstance(target, ast.Subscript):
            container = self.eval(target.value, frame)
            key = self.eval(target.slice, frame)
            if isinstance(container, dict) and isinstance(key, PLAIN):
                if len(container) < MAX_ITEMS or key in container:
                    container[key] = value
            elif isinstance(container, list) and isinstance(key, int):
                container[key] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (list, tuple)) and len(value) == len(target.elts):
                for t, v in zip(target.elts, value):
                    self.assign(t, v, frame)
            else:
                for t in target.elts:
                    self.assign(t, Unknown(source_text(t)), frame)


def _as_load(target: ast.expr) -> Optional[ast.expr]:
    if isinstance(target, (ast.Name, ast.Subscript, ast.Attribute)):
        return target
    return None
