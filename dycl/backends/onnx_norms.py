"""``torch.linalg.vector_norm(x, ord=±inf)`` (and ``x.norm(p=±inf)``, which torch lowers to it) with
NaN propagated as eager does.

torch's translation is ``ReduceMax``/``ReduceMin`` of ``Abs(x)``; ONNX Runtime's reductions skip
or keep a NaN by position (``[nan, inf]`` gave ``inf``, ``-inf`` norms of a row holding a NaN and
a 0 gave 0), where eager's norm is NaN wherever a reduced element is. Here torch's result is
replaced by NaN where the reduced elements hold one (``onnx_nan_reductions``' flags). Other
orders (sums of powers already propagate NaN) and dims that are not constants keep torch's
translation.

Assumes: arguments as the TorchScript exporter passes them (``onnx_graph_values``).
Guarantees: the result's type and shape are torch's translation's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from dycl.backends.onnx_graph_values import constant, rank, scalar_type
from dycl.backends.onnx_nan_reductions import any_nan, nan_where

Symbolic = Callable[..., Any]


def vector_norm_like(original: Symbolic) -> Symbolic:
    """``aten::linalg_vector_norm(x, ord, dim, keepdim, dtype)``."""

    def symbolic(g, self, ord, dim, keepdim, dtype):
        result = original(g, self, ord, dim, keepdim, dtype)
        order, dims, keep = constant(ord), constant(dim), constant(keepdim)
        if not isinstance(order, (int, float)) or not math.isinf(order) or not isinstance(keep, (bool, int)):
            return result
        if scalar_type(self) not in ("Float", "Double", "Half", "BFloat16") or not rank(self):
            return result
        dims = [dims] if isinstance(dims, int) else dims
        if dims is not None and not isinstance(dims, list):
            return result
        return nan_where(g, any_nan(g, self, dims or None, bool(keep)), result)

    return symbolic


WRAPPERS: dict[str, Callable[[Symbolic], Symbolic]] = {"aten::linalg_vector_norm": vector_norm_like}

__all__ = ["WRAPPERS"]
