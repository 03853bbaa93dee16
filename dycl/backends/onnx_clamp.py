"""``clamp``/``clip``/``clamp_min``/``clamp_max`` by comparisons, as eager clamps.

torch's translation is ONNX ``Clip``, which ONNX Runtime (1.31) gets wrong at the edges eager
defines: its int64 ``Clip`` compares in 32 bits (``Clip([3600000256], -5, 5)`` stayed
``3600000256``), a one-sided float ``Clip`` bounds the other side at ±FLT_MAX (``inf.clamp(min=0)``
gave ``3.4e38``), and a NaN bound is ignored where eager's result is NaN
(``x.clamp(min=nan)`` is all NaN). Here, for every element type:

    r = Where(x < lo or isnan(lo), lo, x);  r = Where(r > hi or isnan(hi), hi, r)

which is ``min(max(x, lo), hi)`` with NaN propagated as eager does: a NaN ``x`` fails both
comparisons and stays NaN, a NaN bound wins, and ``lo > hi`` gives ``hi``. Bounds (scalars or
tensors, broadcast) are cast to ``x``'s type; an integer ``x`` with a floating bound (eager
promotes to float) keeps torch's translation.

Assumes: arguments as the TorchScript exporter passes them (``onnx_graph_values``).
Guarantees: the result has ``x``'s element type and the broadcast shape, as eager's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dycl.backends.onnx_graph_values import is_none, scalar_type

Symbolic = Callable[..., Any]
_FLOATING = frozenset({"Float", "Double", "Half", "BFloat16"})
_ONNX_TYPES = {"Float": 1, "Byte": 2, "Char": 3, "Short": 5, "Int": 6, "Long": 7, "Bool": 9, "Half": 10,
               "Double": 11, "BFloat16": 16}


def _bound(g, x, bound, below: bool, result):
    """``result`` limited by ``bound`` from below (``below``) or above; NaN bounds win for floats."""
    bound = g.op("Cast", bound, to_i=_ONNX_TYPES[scalar_type(x)])
    beyond = g.op("Less" if below else "Greater", result, bound)
    if scalar_type(x) in _FLOATING:
        beyond = g.op("Or", beyond, g.op("IsNaN", bound))
    return g.op("Where", beyond, bound, result)


def _readable(x, bounds: list[Any]) -> bool:
    kind = scalar_type(x)
    if kind not in _ONNX_TYPES or kind == "Bool":
        return False
    return kind in _FLOATING or all(is_none(b) or scalar_type(b) not in _FLOATING for b in bounds)


def clamp_like(lower: bool, upper: bool) -> Callable[[Symbolic], Symbolic]:
    """``aten::clamp``/``clip`` (both bounds, either may be None), ``clamp_min`` (``lower`` only),
    ``clamp_max`` (``upper`` only)."""

    def wrap(original: Symbolic) -> Symbolic:
        def symbolic(g, self, *bounds):
            if not _readable(self, list(bounds)):
                return original(g, self, *bounds)
            low = bounds[0] if lower else None
            high = bounds[-1] if upper else None
            result = self
            if low is not None and not is_none(low):
                result = _bound(g, self, low, True, result)
            if high is not None and not is_none(high):
                result = _bound(g, self, high, False, result)
            return result if result is not self else g.op("Identity", self)

        return symbolic

    return wrap


WRAPPERS: dict[str, Callable[[Symbolic], Symbolic]] = {
    "aten::clamp": clamp_like(True, True), "aten::clip": clamp_like(True, True),
    "aten::clamp_min": clamp_like(True, False), "aten::clamp_max": clamp_like(False, True),
}

__all__ = ["WRAPPERS"]
