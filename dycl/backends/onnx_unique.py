"""``torch.unique`` of a floating tensor holding NaN, as eager gives it.

Eager's ``torch.unique(x)`` (sorted) keeps every NaN as a value of its own, after all other
values: ``[1, nan, 2, nan, 1]`` gives ``[1, 2, nan, nan]``. ONNX Runtime's ``Unique`` merged or
misplaced them. Here torch's translation runs on the NaN-free elements (``Compress``) and the NaN
elements are appended. ``return_counts`` follows the same split: ``Unique``'s counts of the
NaN-free values, then a count of 1 per NaN. ``return_inverse`` of a floating tensor is refused as
an exporter error naming the operator: which of the NaN values eager's inverse gives each NaN
element is the order its sort leaves equal keys in (``[11, 10, ..., 6]`` for six NaNs of 24
elements, ascending for two of six), no rule of the values. An unsorted floating ``unique`` with
counts is refused too (eager's order is its hash's); integer and bool inputs keep torch's
translation.

Assumes: arguments as the TorchScript exporter passes them (``onnx_graph_values``); the
translation returns ``(values, inverse, counts)`` with ``Unique``'s flat int64 inverse and counts.
Guarantees: the values' type is torch's; they are 1-D, as eager's unique without ``dim``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from dycl.backends.onnx_graph_values import SymbolicUnsupported, constant, scalar_type

Symbolic = Callable[..., Any]


def unique_like(original: Symbolic) -> Symbolic:
    """``aten::_unique2(x, sorted, return_inverse, return_counts)``."""

    def symbolic(g, self, is_sorted, return_inverse, return_counts):
        if scalar_type(self) not in ("Float", "Double", "Half", "BFloat16"):
            return original(g, self, is_sorted, return_inverse, return_counts)
        if constant(return_inverse):
            raise SymbolicUnsupported("unique", "return_inverse of a floating tensor (the inverse of its NaN entries)")
        counted = constant(return_counts)
        if counted and not constant(is_sorted):
            raise SymbolicUnsupported("unique", "return_counts of a floating tensor with sorted=False")
        flat = g.op("Reshape", self, _int64(g, [-1]))
        is_nan = g.op("IsNaN", flat)
        values, inverse, counts = original(g, g.op("Compress", flat, g.op("Not", is_nan), axis_i=0), is_sorted,
                                           return_inverse, return_counts)
        nan_values = g.op("Compress", flat, is_nan, axis_i=0)
        if counted:
            nans = g.op("Cast", is_nan, to_i=_INT64)
            counts = g.op("Concat", counts, g.op("Compress", nans, is_nan, axis_i=0), axis_i=0)
        return g.op("Concat", values, nan_values, axis_i=0), inverse, counts

    return symbolic


def _int64(g, value):
    return g.op("Constant", value_t=torch.tensor(value, dtype=torch.int64))


_INT64 = 7  # ONNX TensorProto.INT64

WRAPPERS: dict[str, Callable[[Symbolic], Symbolic]] = {"aten::_unique2": unique_like}

__all__ = ["WRAPPERS"]
