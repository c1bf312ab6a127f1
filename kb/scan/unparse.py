"""`ast.unparse` for conditions, without the redundant parentheses CPython 3.11 adds.

`ast.unparse` writes `a > 1 and not b` as `a > 1 and (not b)` (each later operand of a
boolean operator gets a higher precedence). Guards are shown to people, so operands of
`and`/`or` here all get the same precedence, which is exact for these associative operators.
Message templates keep plain `ast.unparse`: ids are computed from them.
"""

from __future__ import annotations

import ast

_Base = getattr(ast, "_Unparser", None)

if _Base is not None:

    class _Unparser(_Base):  # type: ignore[misc, valid-type]
        def visit_BoolOp(self, node: ast.BoolOp) -> None:
            operator = self.boolops[node.op.__class__.__name__]
            operand_precedence = self.boolop_precedence[operator].next()

            def traverse(value: ast.expr) -> None:
                self.set_precedence(operand_precedence, value)
                self.traverse(value)

            with self.require_parens(self.boolop_precedence[operator], node):
                self.interleave(lambda: self.write(f" {operator} "), traverse, node.values)

    def unparse(node: ast.AST) -> str:
        text: str = _Unparser().visit(node)
        return text

else:  # pragma: no cover - every supported CPython has ast._Unparser

    def unparse(node: ast.AST) -> str:
        return ast.unparse(node)
