"""A static upper bound on a number computed from data: the trip bound of ``for _ in range(n)``
when ``n`` comes from the input (``rewriter.unroll``).

A loop whose count comes from data cannot be unrolled as written, but often its count is capped
by something static::

    steps = min(int(x.abs().sum()), 4)           # a cap
    t = int(x.abs().mean().item() * 3) % 3       # a remainder
    k = int(self.head(x).argmax(-1)[0])          # an index into a static dim (an nn.Linear's 4 outputs)
    n = int(logits.clamp(0, 5).max())            # a clamp

``ceiling(node, calculus)`` follows the names of such an expression back through their
definitions (``rewriter.bounded_rows.Definitions``; a definition counts only where it reaches the
loop on every path: ``Calculus.reaches``) and computes ``M``, an integer with ``floor(v) <= M`` for
every value ``v`` the expression can take (every element, for a tensor), by these rules:

- a static int or float ``c``: ``floor(c)``;
- a comparison (a bool, or a tensor of bools): 1;
- ``min(a, b, ...)``: the least ``M`` of the operands that have one; ``max(...)``: the greatest, all
  operands bounded; ``a if c else b``: the greater of both;
- ``int(a)``, ``a.long()`` (truncation toward zero; no narrower integer, which could wrap): ``max(M_a, 0)``;
  ``a.item()``, ``a.floor()``, ``math.floor(a)``, ``float(a)`` / ``a.float()`` (where ``|M_a| < 2**24``,
  so that the conversion is exact): ``M_a``; ``round``,
  ``ceil``: ``M_a + 1``; ``a[...]`` (some elements of ``a``), ``a.max()``, ``torch.max(a)``: ``M_a``;
- ``a % K`` with a static ``K > 0``: ``ceil(K) - 1`` (Python's and torch's remainder lie in ``[0, K)``);
  ``a // K`` with a static ``K > 0``: ``ceil((M_a + 1) / K) - 1``;
  ``a + c``, ``a - c`` with a static int ``c``: ``M_a ± c``; ``a + b``: ``M_a + M_b + 1``;
- ``a.clamp(lo, K)``, ``a.clamp(max=K)``, ``a.clamp_max(K)``, ``a.clip(...)``, ``torch.clamp(a, ...)``,
  ``torch.minimum(a, b)``: the least of ``floor(K)`` and ``M_a``;
- ``a.argmax(d)`` / ``argmin``: ``size(d) - 1`` (``numel - 1`` without a dim), ``len(a)``,
  ``a.size(d)``, ``a.shape[d]``, ``a.numel()``: that size, ``(a > 0).sum()``,
  ``a.count_nonzero()``: ``a``'s element count, where ``Calculus`` bounds those sizes.

Anything else has no bound, and the loop is refused as before.

Note: why unroll to a cap, not a loop in the host. The host could repeat a sub-DNN call until the
count is reached, with no cap at all. But the HCFG is acyclic by invariant (``hcfg.verify``), and
what rests on that would all need a fixpoint: liveness, the build walk that runs every sub-DNN
once on the example to learn its shapes (a loop-carried tensor may change shape per iteration),
the exploration that searches inputs for every branch, the single-graph lowering to ``If`` nodes
and per-sample routing. Unrolled to a cap, each iteration is a branch like any other, so all of
them hold as they are; what is lost is only the loop whose count has no provable cap, which is
refused at its line with how to cap it.
Guarantees: a returned ``M`` is never below ``floor`` of a value the expression takes at run time
on an input eager PyTorch accepts; NaN (for which ``int`` and ``range`` raise in eager) aside.
"""

from __future__ import annotations

import math

import libcst as cst
import torch
from dycl.rewriter.bounded_rows import MAX_DEPTH, Bounds, Calculus, complete

_TRUNCATING = frozenset({"long"})  # int64 (and Python's int): not int32, which could wrap
_PRESERVING = frozenset({"item", "floor", "max", "amax", "clone", "detach", "squeeze", "flatten", "view", "reshape",
                         "contiguous"})
_TO_FLOAT = frozenset({"float", "double"})  # exact for integers below 2**24 (float32)
_ROUNDING_UP = frozenset({"ceil", "round"})
_CLAMPS = frozenset({"clamp", "clip", "clamp_max", "minimum"})
_INDICES = frozenset({"argmax", "argmin"})


class ValueCalculus(Calculus):
    """``Calculus`` (shape bounds) plus upper bounds on values (module note)."""

    def ceiling(self, node: cst.BaseExpression, depth: int, time: int | None = None) -> int | None:
        if time is not None:
            self.time = time
        if depth > MAX_DEPTH:
            return None
        static = self._static(node) if not isinstance(node, cst.Name) or self._undefined(node.value) else None
        if static is not None:
            return _number_ceiling(static.value)
        if isinstance(node, cst.Name):
            return self.through_definition(node.value, self.ceiling, depth)
        if isinstance(node, cst.Comparison):
            return 1  # a bool, or a tensor of them
        if isinstance(node, cst.BinaryOperation):
            return self._binary(node, depth)
        if isinstance(node, cst.IfExp):
            return _greatest([self.ceiling(node.body, depth + 1), self.ceiling(node.orelse, depth + 1)])
        if isinstance(node, cst.Subscript):
            return self._subscript(node, depth)
        if isinstance(node, cst.Call):
            return self._call_ceiling(node, depth)
        return None

    def _binary(self, node: cst.BinaryOperation, depth: int) -> int | None:
        right = self._static(node.right)
        constant = right.value if right is not None and _is_number(right.value) else None
        if isinstance(node.operator, cst.Modulo):
            return math.ceil(constant) - 1 if constant is not None and constant > 0 else None
        left = self.ceiling(node.left, depth + 1)
        if left is None:
            return None
        if isinstance(node.operator, cst.FloorDivide):
            return math.ceil((left + 1) / constant) - 1 if constant is not None and constant > 0 else None
        if isinstance(constant, int) and isinstance(node.operator, (cst.Add, cst.Subtract)):
            return left + constant if isinstance(node.operator, cst.Add) else left - constant
        if isinstance(node.operator, cst.Add):
            other = self.ceiling(node.right, depth + 1)
            return None if other is None else left + other + 1
        return None

    def _subscript(self, node: cst.Subscript, depth: int) -> int | None:
        if isinstance(node.value, cst.Attribute) and node.value.attr.value == "shape" and len(node.slice) == 1:
            index = node.slice[0].slice
            if isinstance(index, cst.Index):
                return self._size(node.value.value, index.value, depth)
            return None
        return self.ceiling(node.value, depth + 1)  # some of its elements

    def _call_ceiling(self, call: cst.Call, depth: int) -> int | None:
        if any(a.star for a in call.args):
            return None
        positional = [a.value for a in call.args if a.keyword is None]
        keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        receiver = self._static(call.func.value) if isinstance(call.func, cst.Attribute) else None
        if isinstance(call.func, cst.Attribute) and (receiver is None or isinstance(receiver.value, torch.Tensor)):
            return self._method(call.func.attr.value, [call.func.value, *positional], keywords, depth)
        function = self._static(call.func)
        if function is None:
            return None
        value = function.value
        if value in (min, max) and not keywords and len(positional) > 1:
            parts = [self.ceiling(p, depth + 1) for p in positional]
            return _least(parts) if value is min else _greatest(parts)
        if value is len and len(positional) == 1:
            return _dim(self.bounds(positional[0], depth + 1), 0)
        if value in (int, float, round, math.floor, math.ceil) and len(positional) == 1 and not keywords:
            name = {int: "long", float: "float", round: "round", math.floor: "floor", math.ceil: "ceil"}[value]
            return self._method(name, positional, {}, depth)
        name = getattr(value, "__name__", "")
        if name and getattr(torch, name, None) is value:  # torch.clamp(x, 0, 3), torch.argmax(x, 1)
            return self._method(name, positional, keywords, depth)
        return None

    def _method(self, name: str, operands: list[cst.BaseExpression], keywords: dict[str, cst.BaseExpression],
                depth: int) -> int | None:
        if not operands:
            return None
        if name in _CLAMPS:
            return self._clamp(name, operands, keywords, depth)
        if name in _INDICES:
            return self._index(operands, keywords, depth)
        if name in ("size", "numel", "sum", "count_nonzero"):
            return self._count(name, operands, keywords, depth)
        inner = self.ceiling(operands[0], depth + 1)
        if inner is None or (len(operands) > 1 and name not in ("view", "reshape", "squeeze", "flatten")):
            return None
        if name in _TRUNCATING:
            return max(inner, 0)
        if name in _TO_FLOAT:
            return inner if abs(inner) < 2 ** 24 else None
        if name in _PRESERVING:
            return inner if name not in ("max", "amax") or (len(operands) == 1 and not keywords) else None
        if name in _ROUNDING_UP:
            return inner + 1 if not keywords else None
        return None

    def _clamp(self, name: str, operands: list[cst.BaseExpression], keywords: dict[str, cst.BaseExpression],
               depth: int) -> int | None:
        if name == "minimum":
            other = operands[1] if len(operands) > 1 else keywords.get("other")
            second = None if other is None else self.ceiling(other, depth + 1)
            return _least([self.ceiling(operands[0], depth + 1), second])
        position = 1 if name == "clamp_max" else 2
        top = operands[position] if len(operands) > position else keywords.get("max")
        static = self._static(top) if top is not None else None
        cap = _number_ceiling(static.value) if static is not None else None
        return _least([cap, self.ceiling(operands[0], depth + 1)])

    def _index(self, operands: list[cst.BaseExpression], keywords: dict[str, cst.BaseExpression],
               depth: int) -> int | None:
        dim_node = operands[1] if len(operands) > 1 else keywords.get("dim")
        bounds = self.bounds(operands[0], depth + 1)
        if dim_node is None:
            count = _numel(bounds)
            return None if count is None else count - 1
        dim = self._static(dim_node)
        size = _dim(bounds, dim.value) if dim is not None and isinstance(dim.value, int) else None
        return None if size is None else size - 1

    def _count(self, name: str, operands: list[cst.BaseExpression], keywords: dict[str, cst.BaseExpression],
               depth: int) -> int | None:
        if name == "size":
            return self._size(operands[0], operands[1], depth) if len(operands) == 2 and not keywords else None
        if name == "sum" and not (len(operands) == 1 and not keywords and _zero_one(operands[0])):
            return None  # a sum is a count only of a tensor of zeros and ones, over all of it
        if name != "sum" and (len(operands) > 1 or keywords):
            return None
        return _numel(self.bounds(operands[0], depth + 1))

    def _size(self, tensor: cst.BaseExpression, dim_node: cst.BaseExpression, depth: int) -> int | None:
        dim = self._static(dim_node)
        if dim is None or not isinstance(dim.value, int) or isinstance(dim.value, bool):
            return None
        return _dim(self.bounds(tensor, depth + 1), dim.value)


def _zero_one(node: cst.BaseExpression) -> bool:
    """A tensor whose elements are 0 and 1 as written: a comparison or ``.bool()``."""
    if isinstance(node, cst.Comparison):
        return True
    return (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "bool"
            and not node.args)


def _dim(bounds: Bounds | None, dim: int) -> int | None:
    if bounds is None:
        return None
    if bounds.open_prefix:
        return bounds.dims[dim] if -len(bounds.dims) <= dim < 0 else None
    known = complete(bounds, len(bounds.dims))
    return known[dim] if known is not None and -len(known) <= dim < len(known) else None


def _numel(bounds: Bounds | None) -> int | None:
    if bounds is None or bounds.open_prefix or None in bounds.dims:
        return None
    return math.prod(bounds.dims)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _number_ceiling(value) -> int | None:
    if isinstance(value, bool):
        return int(value)
    return math.floor(value) if _is_number(value) else None


def _least(parts: list[int | None]) -> int | None:
    known = [p for p in parts if p is not None]
    return min(known) if known else None


def _greatest(parts: list[int | None]) -> int | None:
    return None if any(p is None for p in parts) or not parts else max(parts)


__all__ = ["ValueCalculus"]
