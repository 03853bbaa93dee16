"""``clamp``/``clip``/``clamp_min``/``clamp_max`` by comparisons, as eager clamps.

torch's translation is ONNX ``Clip``, which ONNX Runtime (1.31) gets wrong at the edges eager
defines: its int64 ``Clip`` compares in 32 bits (``Clip([3600000256], -5, 5)`` stayed
``3600000256``), a one-sided float ``Clip`` bounds the other side at ±FLT_MAX (``inf.clamp(min=0)``
gave ``3.4e38``), and a NaN bound is ignored where eager's result is NaN
(``x.clamp(min=nan)`` is all NaN). Here, for every element type:

    r = Where(x < lo or isnan(lo), lo, x);  r = Where(r > hi or isnan(hi), hi, r)

which is ``min(max(x, lo), hi)`` with NaN propagated as eager does: a NaN ``x`` fails both
comparisons and stays NaN, a NaN bound wins, and ``lo > hi`` gives ``hi``. (A floating ``x``
between two finite constant bounds ``lo <= hi`` keeps one ``Clip``: ORT's is exact there.) The result type is
eager's: ``x``'s, promoted with bounds that are tensors of rank >= 1 (``clamp(int32, int64_t)`` is
int64); ``x`` and the bounds are cast to it. An integer ``x`` with a floating scalar bound (eager
promotes to the default float) keeps torch's translation.

Assumes: arguments as the TorchScript exporter passes them (``onnx_graph_values``).
Guarantees: the result has eager's element type and the broadcast shape.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from dycl.backends.onnx_graph_values import constant, is_none, rank, scalar_type

Symbolic = Callable[..., Any]
_FLOATING = frozenset({"Float", "Double", "Half", "BFloat16"})
_ONNX_TYPES = {"Float": 1, "Byte": 2, "Char": 3, "Short": 5, "Int": 6, "Long": 7, "Bool": 9, "Half": 10,
               "Double": 11, "BFloat16": 16}


_TORCH_TYPES = {"Float": torch.float32, "Byte": torch.uint8, "Char": torch.int8, "Short": torch.int16,
                "Int": torch.int32, "Long": torch.int64, "Half": torch.float16, "Double": torch.float64,
                "BFloat16": torch.bfloat16}


def _result_kind(x, bounds: list[Any]) -> str | None:
    """The result's element type as eager promotes it: ``x``'s, or promoted with a bound that is a
    tensor of rank >= 1 (scalars and 0-d bounds of ``x``'s kind do not promote); None where eager
    would promote an integer ``x`` by a floating scalar (left to torch's translation)."""
    kind = scalar_type(x)
    for bound in bounds:
        other = None if is_none(bound) else scalar_type(bound)
        if other is None or other == kind:
            continue
        if other not in _TORCH_TYPES:
            return None
        if rank(bound) != 0:  # an unknown rank: as a tensor
            promoted = torch.promote_types(_TORCH_TYPES[kind], _TORCH_TYPES[other])
            kind = next(name for name, dtype in _TORCH_TYPES.items() if dtype == promoted)
        elif other in _FLOATING and kind not in _FLOATING:
            return None
    return kind


def _number(bound) -> float | None:
    """A bound that is a constant number (None for a tensor or a missing bound)."""
    if bound is None or is_none(bound):
        return None
    value = constant(bound)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _bound(g, kind: str, bound, below: bool, result):
    """``result`` limited by ``bound`` from below (``below``) or above; NaN bounds win for floats."""
    number = _number(bound)
    if scalar_type(bound) != kind:
        bound = g.op("Cast", bound, to_i=_ONNX_TYPES[kind])
    beyond = g.op("Less" if below else "Greater", result, bound)
    if kind in _FLOATING and (number is None or math.isnan(number)):
        beyond = g.op("Or", beyond, g.op("IsNaN", bound))
    return g.op("Where", beyond, bound, result)


def _clip(g, kind: str, x, low, high):
    """``Clip`` for a floating ``x`` between two finite constant bounds ``low <= high``, where ONNX
    Runtime's ``Clip`` is exact (NaN stays NaN, infinities are clipped); None otherwise."""
    numbers = (_number(low), _number(high))
    if kind not in _FLOATING or kind != scalar_type(x) or None in numbers or not all(map(math.isfinite, numbers)) \
            or numbers[0] > numbers[1]:
        return None
    dtype = _TORCH_TYPES[kind]
    return g.op("Clip", x, *(g.op("Constant", value_t=torch.tensor(n, dtype=dtype)) for n in numbers))


def clamp_like(lower: bool, upper: bool) -> Callable[[Symbolic], Symbolic]:
    """``aten::clamp``/``clip`` (both bounds, either may be None), ``clamp_min`` (``lower`` only),
    ``clamp_max`` (``upper`` only)."""

    def wrap(original: Symbolic) -> Symbolic:
        def symbolic(g, self, *bounds):
            kind = _result_kind(self, list(bounds)) if scalar_type(self) in _TORCH_TYPES else None
            if kind is None:
                return original(g, self, *bounds)
            low = bounds[0] if lower else None
            high = bounds[-1] if upper else None
            clipped = _clip(g, kind, self, low, high)
            if clipped is not None:
                return clipped
            result = self if scalar_type(self) == kind else g.op("Cast", self, to_i=_ONNX_TYPES[kind])
            if low is not None and not is_none(low):
                result = _bound(g, kind, low, True, result)
            if high is not None and not is_none(high):
                result = _bound(g, kind, high, False, result)
            return result if result is not self else g.op("Identity", self)

        return symbolic

    return wrap


WRAPPERS: dict[str, Callable[[Symbolic], Symbolic]] = {
    "aten::clamp": clamp_like(True, True), "aten::clip": clamp_like(True, True),
    "aten::clamp_min": clamp_like(True, False), "aten::clamp_max": clamp_like(False, True),
}

__all__ = ["WRAPPERS"]
