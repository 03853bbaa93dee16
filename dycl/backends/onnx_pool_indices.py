"""The indices of max pooling (``return_indices=True``) where a window holds NaN or ``-inf`` only.

Eager's max pooling points at the *last* NaN of a window (its scan takes ``val > max or
isnan(val)``), at the first of equal maxima otherwise, and at the window's first element when it
holds ``-inf`` only. ONNX Runtime's ``MaxPool`` skips NaN and starts at the lowest finite float,
so ``F.max_pool2d(x, 2, return_indices=True)`` pointed elsewhere in a window holding a NaN.

Here the indices come from torch's own translation run on a float64 key with the same order as
eager's scan: finite values as they are (exact in float64), ``+inf`` as ``1e300``, ``-inf`` as
``-1e300`` (above ORT's start), and each NaN as ``2e300 + position * 1e289`` (its flat position
in the input, so a later NaN of a window is larger; distinct and finite for inputs of fewer
than 1e10 elements). A float64 input has no wider key: its indices are ORT's own where the
window's maximum is above ``-DBL_MAX`` (ORT's scan start, so ORT is right there), else those of a
pooling of a level key -- NaN as ``4 + position``, values above ``-DBL_MAX`` 3, ``-DBL_MAX`` 2,
``-inf`` 1 -- whose maximum picks the last NaN, or the first ``-DBL_MAX``, or the first element of a
window of ``-inf`` only, as eager does. The values keep their own translation (``onnx_nan_reductions.pool_like``).

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
_DBL_LOWEST = float(torch.finfo(torch.float64).min)


def _double(g, value: float):
    return g.op("Constant", value_t=torch.tensor(value, dtype=torch.float64))


def _scan_key(g, x):
    """``x`` as float64 ordered as eager's max-pool scan orders it (see the module's docstring)."""
    position = _positions(g, x)
    nan_key = g.op("Add", _double(g, 2e300), g.op("Mul", position, _double(g, 1e289)))
    key = g.op("Where", g.op("IsInf", x, detect_negative_i=0), _double(g, 1e300), g.op("Cast", x, to_i=_ONNX_DOUBLE))
    key = g.op("Where", g.op("IsInf", x, detect_positive_i=0), _double(g, -1e300), key)
    return g.op("Where", g.op("IsNaN", x), nan_key, key)


def _positions(g, x):
    """Each element's flat position in ``x``, as float64 of ``x``'s shape."""
    shape = g.op("Shape", x)
    count = g.op("ReduceProd", shape, keepdims_i=0)
    position = g.op("Range", g.op("Constant", value_t=torch.tensor(0, dtype=torch.int64)), count,
                    g.op("Constant", value_t=torch.tensor(1, dtype=torch.int64)))
    return g.op("Reshape", g.op("Cast", position, to_i=_ONNX_DOUBLE), shape)


def _double_indices(g, original: Symbolic, x, plain, args: tuple):
    """The indices of a float64 max pooling (see the module's docstring): ``plain`` (ORT's) where a
    window's maximum is above ``-DBL_MAX``, else the indices of the level key's pooling."""
    position = _positions(g, x)
    level = g.op("Where", g.op("Greater", x, _double(g, _DBL_LOWEST)), _double(g, 3.0),
                 g.op("Where", g.op("Equal", x, _double(g, _DBL_LOWEST)), _double(g, 2.0), _double(g, 1.0)))
    level = g.op("Where", g.op("IsNaN", x), g.op("Add", position, _double(g, 4.0)), level)
    keyed = original(g, level, *args)
    return g.op("Where", g.op("Equal", keyed[0], _double(g, 3.0)), plain, keyed[1])


def indices_like(original: Symbolic) -> Symbolic:
    """``aten::max_pool{1,2,3}d_with_indices``: values by ``original``, indices by the scan key."""

    def symbolic(g, self, *args):
        result = original(g, self, *args)
        if scalar_type(self) not in ("Float", "Half", "BFloat16", "Double") or not isinstance(result, tuple):
            return result
        if scalar_type(self) == "Double":
            return (result[0], _double_indices(g, original, self, result[1], args), *result[2:])
        keyed = original(g, _scan_key(g, self), *args)
        return (result[0], keyed[1], *result[2:])

    return symbolic


__all__ = ["indices_like"]
