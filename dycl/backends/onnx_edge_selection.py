"""``aminmax``, ``bucketize``, ``>>`` and integer rounding at the edge values where ONNX Runtime's
result is not eager's (found by ``tests/compile/test_op_edge_sweep.py``).

- ``torch.aminmax``: torch's translation is ``ReduceMin``/``ReduceMax``, which skip or keep NaN by
  position and compare int64 in 32 bits. Here floating results are NaN where the reduced elements
  hold one (``onnx_nan_reductions``' flags) and int64 results are the elements at ORT's (right)
  ``ArgMin``/``ArgMax``.
- ``torch.bucketize``: eager puts NaN after every boundary (index ``len(boundaries)``); the
  translation counted the boundaries below NaN (0). Here ``len(boundaries)`` where ``x`` is NaN.
- ``x >> k`` of integers: eager shifts arithmetically (``-7 >> 1`` is -4); the translation divides by
  ``2**k`` with ``Div``, which truncates (-3). Here the same divisor, floor-divided
  (``onnx_division.floor_divide``).
- ``scatter_reduce(..., "amax" | "amin")`` of floats: eager's result is NaN where a NaN lands (or
  was); ORT's ``ScatterElements`` max/min skipped it. Here the NaN flags of ``src`` scatter-added
  into zeros, plus ``x``'s own, mark where the result is NaN.
- ``floor``/``ceil``/``round``/``trunc`` of integers: eager returns them unchanged; ONNX ``Floor``
  of int64 is an invalid model. Here ``Identity``.

Assumes: arguments as the TorchScript exporter passes them (``onnx_graph_values``).
Guarantees: the result's type and shape are torch's translation's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dycl.backends.onnx_division import floor_divide
from dycl.backends.onnx_graph_values import constant, is_none, rank, scalar_type
from dycl.backends.onnx_nan_reductions import any_nan, int64_extreme, nan_where

Symbolic = Callable[..., Any]
_FLOATING = frozenset({"Float", "Double", "Half", "BFloat16"})
_INTEGERS = frozenset({"Long", "Int", "Short", "Char", "Byte"})


def aminmax_like(original: Symbolic) -> Symbolic:
    """``aten::aminmax(x, dim=None, keepdim=False)`` -> ``(min, max)``."""

    def symbolic(g, self, dim, keepdim):
        low, high = original(g, self, dim, keepdim)
        axis, keep = (None if is_none(dim) else constant(dim)), constant(keepdim)
        if (axis is not None and not isinstance(axis, int)) or not isinstance(keep, (bool, int)) or not rank(self):
            return low, high
        if scalar_type(self) == "Long":
            return tuple(int64_extreme(g, self, larger, axis, bool(keep) and axis is not None)
                         for larger in (False, True))
        if scalar_type(self) not in _FLOATING:
            return low, high
        has_nan = any_nan(g, self, None if axis is None else [axis], bool(keep))
        return nan_where(g, has_nan, low), nan_where(g, has_nan, high)

    return symbolic


def bucketize_like(original: Symbolic) -> Symbolic:
    """``aten::bucketize(x, boundaries, out_int32, right)``: NaN after every boundary."""

    def symbolic(g, self, boundaries, *args):
        result = original(g, self, boundaries, *args)
        if scalar_type(self) not in _FLOATING:
            return result
        count = g.op("CastLike", g.op("Size", boundaries), result)
        return g.op("Where", g.op("IsNaN", self), count, result)

    return symbolic


def rshift_like(original: Symbolic) -> Symbolic:
    """``aten::__rshift_`` of integers: the translation's divisor, floor-divided."""

    def symbolic(g, self, other):
        result = original(g, self, other)
        node = result.node()
        if scalar_type(self) not in _INTEGERS or node.kind() != "onnx::Div":
            return result
        return floor_divide(g, self, list(node.inputs())[1])

    return symbolic


def _string(value) -> str | None:
    """A string constant argument (``onnx::Constant``/``prim::Constant`` keep it as attribute ``s``)."""
    if isinstance(value, str):
        return value
    node = value.node()
    if node.hasAttribute("value") and node.kindOf("value") == "s":
        return node.s("value")
    return None


def scatter_reduce_like(original: Symbolic) -> Symbolic:
    """``aten::scatter_reduce(x, dim, index, src, "amax" | "amin", include_self=True)`` of floats of
    rank >= 1: ORT's ``ScatterElements`` max/min (torch's translation without its rank-0 ``If``), NaN
    where a NaN of ``src`` lands or ``x`` holds one (ORT's reduction skipped it)."""

    def symbolic(g, self, dim, index, src, reduce, include_self):
        how, axis = _string(reduce), constant(dim)
        if scalar_type(self) not in _FLOATING or how not in ("amax", "amin") or not isinstance(axis, int) \
                or not rank(self) or constant(include_self) is not True:
            return original(g, self, dim, index, src, reduce, include_self)
        result = g.op("ScatterElements", self, index, src, axis_i=axis, reduction_s=how[1:])
        own = g.op("CastLike", g.op("IsNaN", self), self)
        zeros = g.op("Sub", own, own)
        landed = g.op("ScatterElements", zeros, index, g.op("CastLike", g.op("IsNaN", src), self), axis_i=axis,
                      reduction_s="add")
        return nan_where(g, g.op("Greater", g.op("Add", landed, own), zeros), result)

    return symbolic


def integer_rounding_like(original: Symbolic) -> Symbolic:
    """``aten::floor``/``ceil``/``round``/``trunc`` of integers: unchanged."""

    def symbolic(g, self, *args):
        if scalar_type(self) in _INTEGERS and all(is_none(a) or constant(a) in (0, None) for a in args):
            return g.op("Identity", self)
        return original(g, self, *args)

    return symbolic


WRAPPERS: dict[str, Callable[[Symbolic], Symbolic]] = {
    "aten::aminmax": aminmax_like, "aten::bucketize": bucketize_like, "aten::__rshift_": rshift_like,
    "aten::scatter_reduce": scatter_reduce_like,
    **{f"aten::{name}": integer_rounding_like for name in ("floor", "ceil", "round", "trunc")},
}

__all__ = ["WRAPPERS"]
