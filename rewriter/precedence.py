"""The parentheses an expression needs where it is put into another one.

libcst prints a tree as it is: an expression substituted for a name prints without
parentheses unless it carries them. ``n ** x`` with ``n = -2`` substituted would print
``-2 ** x``, which Python reads as ``-(2 ** x)``: a different value, silently. Every pass
that puts one expression into another passes the result through ``in_slot``:
``walk.map_children`` does for every child it changes, ``substitute.NameReplacer`` for the
names it replaces.

Assumes: Python's operator precedence (the language reference, "Operator precedence");
an expression with its own parentheses (``lpar``) is an atom.
Guarantees: ``in_slot(parent, field, child)`` is ``child``, parenthesised where the
field of ``parent`` would otherwise read it differently, so the printed text parses back
to the same tree; it adds no parentheses where they are not needed.
"""

from __future__ import annotations

import dataclasses

import libcst as cst

LAMBDA, CONDITIONAL, OR, AND, NOT, COMPARISON, BIT_OR, BIT_XOR, BIT_AND, SHIFT, SUM, PRODUCT, UNARY, POWER, \
    AWAIT, ATOM = range(16)
#: a ``yield`` or a tuple without parentheses: parenthesised inside any other expression
BARE = -1
#: a walrus: parenthesised everywhere (``x = (y := f())``)
NAMED = -2

_BINARY: dict[type, int] = {
    cst.Power: POWER,
    cst.Multiply: PRODUCT, cst.MatrixMultiply: PRODUCT, cst.Divide: PRODUCT, cst.FloorDivide: PRODUCT,
    cst.Modulo: PRODUCT,
    cst.Add: SUM, cst.Subtract: SUM,
    cst.LeftShift: SHIFT, cst.RightShift: SHIFT,
    cst.BitAnd: BIT_AND, cst.BitXor: BIT_XOR, cst.BitOr: BIT_OR,
}
NUMBERS = (cst.Integer, cst.Float, cst.Imaginary)
#: the wrappers of expressions inside another expression (an argument, an element, an index, ...)
_INSIDE_EXPRESSIONS = frozenset({cst.Arg, cst.Element, cst.StarredElement, cst.DictElement, cst.StarredDictElement,
                                 cst.Index, cst.Slice, cst.Lambda, cst.FormattedStringExpression, cst.CompFor,
                                 cst.CompIf, cst.Param})


def precedence(expr: cst.BaseExpression) -> int:
    """How tightly ``expr`` binds as printed (``ATOM`` for anything in parentheses)."""
    if getattr(expr, "lpar", ()):
        return ATOM
    kind = type(expr)
    if kind is cst.BinaryOperation:
        return _BINARY[type(expr.operator)]
    if kind is cst.UnaryOperation:
        return NOT if isinstance(expr.operator, cst.Not) else UNARY
    if kind is cst.BooleanOperation:
        return AND if isinstance(expr.operator, cst.And) else OR
    if kind is cst.Comparison:
        return COMPARISON
    if kind is cst.IfExp:
        return CONDITIONAL
    if kind is cst.Lambda:
        return LAMBDA
    if kind is cst.Await:
        return AWAIT
    if kind is cst.NamedExpr:
        return NAMED
    if kind in (cst.Yield, cst.Tuple):
        return BARE
    return ATOM


def _minimum(parent: cst.CSTNode, field: str) -> int:
    """The lowest precedence an unparenthesised expression may have in ``parent.field``."""
    kind = type(parent)
    if kind is cst.BinaryOperation:
        level = _BINARY[type(parent.operator)]
        if level == POWER:  # right-associative; its right operand may be unary: 2 ** -1
            return AWAIT if field == "left" else UNARY
        return level if field == "left" else level + 1
    if kind is cst.UnaryOperation:
        return NOT if isinstance(parent.operator, cst.Not) else UNARY
    if kind is cst.BooleanOperation:
        level = AND if isinstance(parent.operator, cst.And) else OR
        return level if field == "left" else level + 1
    if kind in (cst.Comparison, cst.ComparisonTarget):
        return BIT_OR
    if kind is cst.IfExp:
        return CONDITIONAL if field == "orelse" else OR
    if (kind is cst.Attribute and field == "value") or (kind is cst.Subscript and field == "value") or (
            kind is cst.Call and field == "func") or kind is cst.Await:
        return ATOM
    if kind in _INSIDE_EXPRESSIONS:
        return LAMBDA
    return BARE  # a statement's value or an assignment target: ``x = 1, 2``, ``a, b = t``


def parenthesized(expr: cst.BaseExpression) -> cst.BaseExpression:
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def in_slot(parent: cst.CSTNode, field: str, child: cst.CSTNode) -> cst.CSTNode:
    """``child`` as it must be written in ``parent.field`` (see the module docstring)."""
    if not isinstance(child, cst.BaseExpression):
        return child
    level = precedence(child)
    if level < _minimum(parent, field) or (
            level == ATOM and type(parent) is cst.Attribute and isinstance(child, NUMBERS) and not child.lpar):
        return parenthesized(child)  # also ``(1).real``: ``1.real`` is not Python
    return child


def fix_slots(node: cst.CSTNode, placed: set[int]) -> cst.CSTNode:
    """``node`` with each direct child whose id is in ``placed`` (expressions just put
    there) written as its slot needs (``in_slot``)."""
    changes = {}
    for field in dataclasses.fields(node):
        child = getattr(node, field.name)
        if id(child) in placed:
            fixed = in_slot(node, field.name, child)
            if fixed is not child:
                changes[field.name] = fixed
    return node.with_changes(**changes) if changes else node


def binary(left: cst.BaseExpression, operator: cst.BaseBinaryOp, right: cst.BaseExpression) -> cst.BinaryOperation:
    """``left <operator> right`` with the operands parenthesised as they need (``x *= a + b``
    is ``x = x * (a + b)``)."""
    node = cst.BinaryOperation(left, operator, right)
    return node.with_changes(left=in_slot(node, "left", left), right=in_slot(node, "right", right))
