"""Python code objects for the statements and expressions the HCFG walks run.

Building and exploring the graph run every statement (and many sub-expressions) with
``exec``/``eval``; printing each one with libcst costs more than compiling it (libcst
prints every whitespace token through a context manager per parenthesised node). This
module prints the node kinds the rewritten code is made of directly, and any other kind
(a lambda, a comprehension, an f-string, ...) with libcst.

Assumes: the tree reads back as itself (``rewriter.verify.verify_printed``): its
parentheses (``lpar``/``rpar``) are the ones Python needs.
Guarantees: ``statement_text``/``expression_text`` are Python text with the meaning of
the tree (whitespace and comments dropped); in debug/test mode (``rewriter.checking``)
each text is checked to parse to the same Python AST as libcst's own print.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from types import CodeType

import libcst as cst
from dycl.rewriter.checking import checks_enabled

_BINARY = {cst.Add: "+", cst.Subtract: "-", cst.Multiply: "*", cst.Divide: "/", cst.FloorDivide: "//",
           cst.Modulo: "%", cst.Power: "**", cst.MatrixMultiply: "@", cst.LeftShift: "<<", cst.RightShift: ">>",
           cst.BitAnd: "&", cst.BitOr: "|", cst.BitXor: "^"}
_AUGMENTED = {cst.AddAssign: "+=", cst.SubtractAssign: "-=", cst.MultiplyAssign: "*=", cst.DivideAssign: "/=",
              cst.FloorDivideAssign: "//=", cst.ModuloAssign: "%=", cst.PowerAssign: "**=",
              cst.MatrixMultiplyAssign: "@=", cst.LeftShiftAssign: "<<=", cst.RightShiftAssign: ">>=",
              cst.BitAndAssign: "&=", cst.BitOrAssign: "|=", cst.BitXorAssign: "^="}
_UNARY = {cst.Minus: "-", cst.Plus: "+", cst.BitInvert: "~", cst.Not: "not "}
_COMPARISON = {cst.Equal: "==", cst.NotEqual: "!=", cst.LessThan: "<", cst.LessThanEqual: "<=",
               cst.GreaterThan: ">", cst.GreaterThanEqual: ">=", cst.In: "in", cst.NotIn: "not in", cst.Is: "is",
               cst.IsNot: "is not"}
_LEAVES = (cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString)


def _libcst_text(node: cst.CSTNode) -> str:
    if isinstance(node, cst.BaseStatement):
        return cst.Module([node]).code
    return cst.Module([]).code_for_node(node)


def _parenthesised(node: cst.BaseExpression, text: str) -> str:
    return "(" * len(node.lpar) + text + ")" * len(node.rpar) if node.lpar else text


class Printer:
    """Prints nodes as Python text; ``substitute`` may print an expression itself (its
    text, or None to print it as usual): ``hcfg.shared_runs`` writes module paths as a
    placeholder. Nodes printed by libcst are printed whole, without substitution."""

    def __init__(self, substitute: Callable[[cst.BaseExpression], str | None] | None = None) -> None:
        self.substitute = substitute

    def expression(self, node: cst.BaseExpression) -> str:
        """``node`` as Python text (see the module docstring)."""
        if self.substitute is not None:
            text = self.substitute(node)
            if text is not None:
                return text
        direct = self._direct(node)
        if direct is None:
            return _libcst_text(node)
        return _parenthesised(node, direct)

    def statement(self, stmt: cst.BaseStatement) -> str:
        """``stmt`` (a line of small statements; any other kind through libcst) as Python text."""
        if isinstance(stmt, cst.SimpleStatementLine):
            smalls = [self._small(small) for small in stmt.body]
            if None not in smalls:
                return "; ".join(smalls) + "\n"
        return _libcst_text(stmt)

    def _elements(self, elements: Sequence[cst.BaseElement]) -> str:
        parts = []
        for element in elements:
            if isinstance(element, cst.StarredElement):
                parts.append(_parenthesised(element, "*" + self.expression(element.value)))
            else:
                parts.append(self.expression(element.value))
        return ", ".join(parts)

    def _argument(self, arg: cst.Arg) -> str:
        keyword = f"{arg.keyword.value}=" if arg.keyword is not None else ""
        return f"{arg.star}{keyword}{self.expression(arg.value)}"

    def _subscript_element(self, element: cst.SubscriptElement) -> str:
        index = element.slice
        if isinstance(index, cst.Index):
            return (getattr(index, "star", None) or "") + self.expression(index.value)
        text = ":".join(self.expression(part) if part is not None else "" for part in (index.lower, index.upper))
        return text + (":" + self.expression(index.step) if index.step is not None else "")

    def _direct(self, node: cst.BaseExpression) -> str | None:
        """The text of ``node`` without its own parentheses, or None for a kind printed by libcst."""
        kind, text = type(node), self.expression
        if kind in _LEAVES:
            return node.value
        if kind is cst.Attribute:
            return f"{text(node.value)}.{node.attr.value}"
        if kind is cst.Call:
            return f"{text(node.func)}({', '.join(self._argument(a) for a in node.args)})"
        if kind is cst.Subscript:
            elements = node.slice
            tail = "," if len(elements) == 1 and isinstance(elements[0].comma, cst.Comma) else ""
            return f"{text(node.value)}[{', '.join(map(self._subscript_element, elements))}{tail}]"
        if kind is cst.BinaryOperation:
            return f"{text(node.left)} {_BINARY[type(node.operator)]} {text(node.right)}"
        if kind is cst.UnaryOperation:
            return _UNARY[type(node.operator)] + text(node.expression)
        if kind is cst.BooleanOperation:
            return f"{text(node.left)} {'and' if isinstance(node.operator, cst.And) else 'or'} {text(node.right)}"
        if kind is cst.Comparison:
            return text(node.left) + "".join(
                f" {_COMPARISON[type(t.operator)]} {text(t.comparator)}" for t in node.comparisons)
        if kind is cst.IfExp:
            return f"{text(node.body)} if {text(node.test)} else {text(node.orelse)}"
        if kind is cst.Tuple:
            return self._elements(node.elements) + ("," if len(node.elements) == 1 else "")
        if kind is cst.List:
            return f"[{self._elements(node.elements)}]"
        if kind is cst.Ellipsis:
            return "..."
        return None

    def _small(self, small: cst.BaseSmallStatement) -> str | None:
        kind, text = type(small), self.expression
        if kind is cst.Assign:
            return "".join(f"{text(t.target)} = " for t in small.targets) + text(small.value)
        if kind is cst.AugAssign:
            return f"{text(small.target)} {_AUGMENTED[type(small.operator)]} {text(small.value)}"
        if kind is cst.Expr:
            return text(small.value)
        if kind is cst.Return:
            return "return" if small.value is None else "return " + text(small.value)
        if kind is cst.Pass:
            return "pass"
        return None


_PLAIN = Printer()
#: ``node`` as Python text (see the module docstring)
expression_text = _PLAIN.expression
#: ``stmt`` as Python text, one line for a line of small statements
statement_text = _PLAIN.statement


def compile_statements(stmts: Sequence[cst.BaseStatement], filename: str) -> CodeType:
    """The code object running ``stmts`` in order (``exec``)."""
    text = "".join(statement_text(stmt) for stmt in stmts)
    if checks_enabled():
        _check_same(text, "".join(_libcst_text(stmt) for stmt in stmts), "exec")
    return compile(text, filename, "exec")


def compile_expression(node: cst.BaseExpression, filename: str) -> CodeType:
    """The code object evaluating ``node`` (``eval``)."""
    text = expression_text(node)
    if checks_enabled():
        _check_same(text, _libcst_text(node), "eval")
    return compile(text, filename, "eval")


class PrintedCodeError(AssertionError):
    """The direct print of a node means something else than libcst's (a dycl bug)."""


def _check_same(text: str, reference: str, mode: str) -> None:
    if ast.dump(ast.parse(text, mode=mode)) != ast.dump(ast.parse(reference, mode=mode)):
        raise PrintedCodeError(f"printed {text!r}, libcst prints {reference!r}")
