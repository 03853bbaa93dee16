"""A condition's host test as a tensor expression that a graph computes exactly as the host.

The host decides ``if v.item() > 0.5:`` in Python: ``v.item()`` of a float32 tensor is a
Python float (a double holding the float32 value exactly) compared with a double constant.
Inside a graph the same comparison runs in the tensor's dtype, where ``0.5`` becomes a float32
constant; for a constant that float32 cannot hold (``0.8``) rounding it to nearest may flip the
decision of the one float32 value next to it. ``in_graph`` gives the comparison with a float32
constant chosen so that, for *every* float32 value, the graph's answer is the host's:

- ``v > c`` and ``v <= c`` use ``down(c)``, the largest float32 not above ``c``;
- ``v >= c`` and ``v < c`` use ``up(c)``, the smallest float32 not below ``c``;
- ``v == c`` and ``v != c`` need ``c`` to be a float32 (else nothing is proven: refused).

(No float32 lies strictly between ``c`` and ``down(c)`` or ``up(c)``, so e.g. ``v > c`` iff
``v > down(c)``; a NaN compares false both ways.) Integer tensors take integer constants
as they are; a float64 tensor compares in double on both sides; a bool tensor's test is itself.

Assumes the test's tensor ``v`` is a one-element tensor of the example's dtype on every path
(the caller's flow of examples, ``dycl.per_sample.rejoin``). Guarantees: ``in_graph`` returns
source for a one-element bool tensor of ``v``'s shape equal to the host's decision, or None
(keep routing).
"""

from __future__ import annotations

import ast
import math
from typing import Any

import libcst as cst
import numpy as np
import torch

_OPERATORS = {cst.GreaterThan: ">", cst.GreaterThanEqual: ">=", cst.LessThan: "<", cst.LessThanEqual: "<=",
              cst.Equal: "==", cst.NotEqual: "!="}
_FLIPPED = {">": "<", ">=": "<=", "<": ">", "<=": ">=", "==": "==", "!=": "!="}
_INTEGERS = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


def tested_name(test: cst.BaseExpression) -> str | None:
    """The tensor name a supported test reads (``v``, ``v.item()``, ``v.item() OP c``, ``c OP v.item()``)."""
    parts = _parts(test)
    return None if parts is None else parts[0]


def in_graph(test: cst.BaseExpression, value: Any) -> str | None:
    """Source of a one-element bool tensor expression (``v``'s shape) equal to the host's ``test`` where its name's
    value is like ``value`` (module docstring), or None."""
    parts = _parts(test)
    if parts is None or not isinstance(value, torch.Tensor) or value.numel() != 1:
        return None
    name, operator, constant = parts
    if operator is None:
        return name if value.dtype == torch.bool else None
    bound = _constant(value.dtype, operator, constant)
    return None if bound is None else f"({name} {operator} {bound})"


def _parts(test: cst.BaseExpression) -> tuple[str, str | None, Any] | None:
    """``(name, operator, constant)`` of ``name.item() OP constant`` (or flipped), ``(name, None,
    None)`` of ``name`` or ``name.item()``; None for any other test."""
    name = _item_of(test)
    if name is not None:
        return name, None, None
    if isinstance(test, cst.Name):
        return test.value, None, None
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    target = test.comparisons[0]
    operator = _OPERATORS.get(type(target.operator))
    left, right = _item_of(test.left), _item_of(target.comparator)
    if operator is None:
        return None
    if left is not None and (constant := _literal(target.comparator)) is not None:
        return left, operator, constant
    if right is not None and (constant := _literal(test.left)) is not None:
        return right, _FLIPPED[operator], constant
    return None


def _item_of(node: cst.BaseExpression) -> str | None:
    """``v`` of ``v.item()``."""
    if (isinstance(node, cst.Call) and not node.args and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "item" and isinstance(node.func.value, cst.Name)):
        return node.func.value.value
    return None


def _literal(node: cst.BaseExpression) -> int | float | None:
    """The value of a numeric literal (``0``, ``0.5``, ``-1e-3``), else None."""
    if not isinstance(node, cst.Integer | cst.Float | cst.UnaryOperation):
        return None
    try:
        value = ast.literal_eval(cst.Module([]).code_for_node(node))
    except (ValueError, SyntaxError):
        return None
    return value if type(value) in (int, float) and math.isfinite(value) else None


def _constant(dtype: torch.dtype, operator: str, constant: int | float) -> str | None:
    """The constant's source for the graph's comparison in ``dtype`` (module docstring)."""
    if dtype in _INTEGERS:
        return repr(constant) if type(constant) is int else None
    if dtype == torch.float64:
        return repr(float(constant))
    if dtype != torch.float32 or abs(constant) > float(np.finfo(np.float32).max):
        return None
    nearest = float(np.float32(constant))
    if nearest == constant:
        return repr(nearest)
    if operator in ("==", "!="):
        return None
    toward = math.inf if nearest < constant else -math.inf  # the float32 on the constant's other side
    other = float(np.nextafter(np.float32(nearest), np.float32(toward)))
    down, up = min(nearest, other), max(nearest, other)
    return repr(down if operator in (">", "<=") else up)


__all__ = ["in_graph", "tested_name"]
