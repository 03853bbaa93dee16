"""``torch.unique`` of a floating tensor holding NaN, as eager gives it.

Eager's ``torch.unique(x)`` (sorted) keeps every NaN as a value of its own, after all other
values: ``[1, nan, 2, nan, 1]`` gives ``[1, 2, nan, nan]``. ONNX Runtime's ``Unique`` merged or
misplaced them. Here torch's translation runs on the NaN-free elements (``Compress``) and the NaN
elements are appended. With ``return_inverse`` or ``return_counts`` (whose NaN entries would need
the same care) a floating ``unique`` is refused as an exporter error naming the operator; integer
and bool inputs keep torch's translation.

Assumes: arguments as the TorchScript exporter passes them (``onnx_graph_values``); the
translation returns ``(values, inverse, counts)``. Guarantees: the values' type is torch's; they
are 1-D, as eager's unique without ``dim``.
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
        if constant(return_inverse) or constant(return_counts):
            raise SymbolicUnsupported("unique", "return_inverse or return_counts of a floating tensor (NaN entries)")
        flat = g.op("Reshape", self, g.op("Constant", value_t=torch.tensor([-1], dtype=torch.int64)))
        is_nan = g.op("IsNaN", flat)
        values, inverse, counts = original(g, g.op("Compress", flat, g.op("Not", is_nan), axis_i=0), is_sorted,
                                           return_inverse, return_counts)
        return g.op("Concat", values, g.op("Compress", flat, is_nan, axis_i=0), axis_i=0), inverse, counts

    return symbolic


WRAPPERS: dict[str, Callable[[Symbolic], Symbolic]] = {"aten::_unique2": unique_like}

__all__ = ["WRAPPERS"]
