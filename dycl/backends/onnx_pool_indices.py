"""The indices of max pooling (``return_indices=True``) where a window holds NaN or ``-inf`` only.

Eager's max pooling points at the *last* NaN of a window (its scan takes ``val > max or
isnan(val)``), at the first of equal maxima otherwise, and at the window's first element when it
holds ``-inf`` only. ONNX Runtime's ``MaxPool`` skips NaN and starts at the lowest finite float,
so ``F.max_pool2d(x, 2, return_indices=True)`` pointed elsewhere in a window holding a NaN.

Here the indices come from torch's own translation run on a float64 key with the same order as
eager's scan: finite values as they are (exact in float64), ``+inf`` as ``1e300``, ``-inf`` as
``-1e300`` (above ORT's start), and each NaN as ``2e300 + position * 1e289`` (its flat position
in the input, so a later NaN of a window is larger; distinct and finite for inputs of fewer
than 1e10 elements). The values keep their own translation (``onnx_nan_reductions.pool_like``).

Assumes: arguments as the TorchScript exporter passes them; the translation returns
``(values, indices)``. Guarantees: the indices' type and shape are torch's translation's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from dycl.backends.onnx_graph_values import scalar_type

Symbolic = Callable[..., Any]
_ONNX_DOUBLE = 11


def _double(g, value: float):
    return g.op("Constant", value_t=torch.tensor(value, dtype=torch.float64))


def _scan_key(g, x):
    """``x`` as float64 ordered as eager's max-pool scan orders it (see the module's docstring)."""
    shape = g.op("Shape", x)
    count = g.op("ReduceProd", shape, keepdims_i=0)
    position = g.op("Range", g.op("Constant", value_t=torch.tensor(0, dtype=torch.int64)), count,
                    g.op("Constant", value_t=torch.tensor(1, dtype=torch.int64)))
    position = g.op("Reshape", g.op("Cast", position, to_i=_ONNX_DOUBLE), shape)
    nan_key = g.op("Add", _double(g, 2e300), g.op("Mul", position, _double(g, 1e289)))
    key = g.op("Where", g.op("IsInf", x, detect_negative_i=0), _double(g, 1e300), g.op("Cast", x, to_i=_ONNX_DOUBLE))
    key = g.op("Where", g.op("IsInf", x, detect_positive_i=0), _double(g, -1e300), key)
    return g.op("Where", g.op("IsNaN", x), nan_key, key)


def indices_like(original: Symbolic) -> Symbolic:
    """``aten::max_pool{1,2,3}d_with_indices``: values by ``original``, indices by the scan key."""

    def symbolic(g, self, *args):
        result = original(g, self, *args)
        if scalar_type(self) not in ("Float", "Half", "BFloat16") or not isinstance(result, tuple):
            return result
        keyed = original(g, _scan_key(g, self), *args)
        return (result[0], keyed[1], *result[2:])

    return symbolic


__all__ = ["indices_like"]
