"""``gelu`` and ``hardshrink`` at the edge values where ONNX Runtime's result is not eager's.

- ``gelu`` (exact): eager's vectorised kernel (every tensor of two elements or more) gives NaN at
  ``±inf`` and ``inf`` above ``FLT_MAX / 2`` (``x * (1 + erf)`` overflows before the halving);
  torch's translation gave ``inf``/``0`` and ``FLT_MAX``. (Eager's scalar path -- a one-element
  tensor, or a strided one such as ``x[:, ::2]`` or ``x.t()`` -- gives ``inf`` at ``inf`` and
  ``FLT_MAX`` at ``FLT_MAX``: eager's own answer there depends on the memory layout. dycl follows the
  vectorised kernel, which contiguous tensors take.)
- ``gelu(approximate="tanh")``: eager is ``x`` itself above 10 (``tanh`` is 1 there) and NaN at
  ``-inf``; the translation's ``x**3`` overflowed (``FLT_MAX`` gave ``inf``; float64's ``DBL_MAX`` too).
- ``hardshrink``: NaN in, NaN out in eager; the translation's ``Where(|x| > l, x, 0)`` gave 0.

Each runs torch's own translation and replaces its result only where the input is at such an
edge (``Where`` on the input), for float32 (the thresholds are float32's; ``gelu``'s tanh form for
float64 too); other types keep it.

Assumes: arguments as the TorchScript exporter passes them (``onnx_graph_values``).
Guarantees: the result's type and shape are torch's translation's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from dycl.backends.onnx_graph_values import scalar_type

Symbolic = Callable[..., Any]
_HALF_FLT_MAX = float(torch.finfo(torch.float32).max) / 2


_TYPES = {"Float": torch.float32, "Double": torch.float64}


def _number(g, value: float, kind: str = "Float"):
    return g.op("Constant", value_t=torch.tensor(value, dtype=_TYPES[kind]))


def _approximation(value) -> str | None:
    """``gelu``'s ``approximate`` argument: a string constant (None where it cannot be read)."""
    if isinstance(value, str):
        return value
    node = value.node()
    if node.kind() in ("prim::Constant", "onnx::Constant") and node.hasAttribute("value") \
            and node.kindOf("value") == "s":
        return node.s("value")
    return None


def gelu_like(original: Symbolic) -> Symbolic:
    """``aten::gelu`` with eager's values at ``±inf`` and beyond float32's overflow."""

    def symbolic(g, self, approximate="none"):
        result = original(g, self, approximate)
        how, kind = _approximation(approximate), scalar_type(self)
        if how == "tanh" and kind in _TYPES:  # float64 too: its x**3 overflows above 5.6e102
            result = g.op("Where", g.op("Greater", self, _number(g, 10.0, kind)), self, result)
            return g.op("Where", g.op("IsInf", self, detect_positive_i=0), _number(g, float("nan"), kind), result)
        if kind != "Float" or how != "none":
            return result
        nan = _number(g, float("nan"))
        result = g.op("Where", g.op("Greater", self, _number(g, _HALF_FLT_MAX)), _number(g, float("inf")), result)
        return g.op("Where", g.op("IsInf", self), nan, result)

    return symbolic


def nan_through(original: Symbolic) -> Symbolic:
    """An elementwise translation with NaN passed through (``Where(IsNaN(x), x, result)``)."""

    def symbolic(g, self, *args):
        result = original(g, self, *args)
        if scalar_type(self) not in ("Float", "Double", "Half", "BFloat16"):
            return result
        return g.op("Where", g.op("IsNaN", self), self, result)

    return symbolic


WRAPPERS: dict[str, Callable[[Symbolic], Symbolic]] = {"aten::gelu": gelu_like, "aten::hardshrink": nan_through}

__all__ = ["WRAPPERS"]
