"""float64 translations whose ONNX Runtime kernel differs from eager at edge values.

- ``log_softmax`` of float64: ORT's double ``LogSoftmax`` gave ``-inf`` for a row holding ``+inf``
  where eager's ``(x - max) - log(sum(exp(x - max)))`` is NaN (``inf - inf``), and so did
  ``cross_entropy``, which is built on it. Here that formula itself, along the same ``dim``: NaN
  where eager's is (a row with ``+inf``, NaN, or ``-inf`` only), equal within rounding elsewhere.
  ``cross_entropy`` (ORT's ``SoftmaxCrossEntropyLoss`` gave ``inf``) is ``nll_loss`` of it, as in eager.
- (``logsigmoid`` of float64, ``-inf`` below -745: ``onnx_edge_arithmetic``, with float32's.)

- ``celu`` of float64: ORT's ``Celu`` computes ``x / alpha`` first, so ``DBL_MAX`` gave ``inf``;
  eager's is ``x`` itself where ``x > 0``. Here that.

Other types keep torch's translation (float32's agree with eager: the sweep checks it).

Assumes: arguments as the TorchScript exporter passes them (``onnx_graph_values``); opset 17.
Guarantees: the result's type and shape are torch's translation's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from dycl.backends.onnx_graph_values import constant, is_none, rank, scalar_type

Symbolic = Callable[..., Any]


def log_softmax_like(original: Symbolic) -> Symbolic:
    """``aten::log_softmax(x, dim, dtype)`` of float64 without ``dtype``: eager's formula."""

    def symbolic(g, self, dim, dtype=None):
        axis = constant(dim)
        if scalar_type(self) != "Double" or not isinstance(axis, int) or not (dtype is None or is_none(dtype)):
            return original(g, self, dim, dtype)
        return _log_softmax(g, self, axis)

    return symbolic


def _log_softmax(g, x, axis: int):
    shifted = g.op("Sub", x, g.op("ReduceMax", x, axes_i=[axis], keepdims_i=1))
    total = g.op("ReduceSum", g.op("Exp", shifted), g.op("Constant", value_t=torch.tensor([axis])), keepdims_i=1)
    return g.op("Sub", shifted, g.op("Log", total))


def cross_entropy_like(original: Symbolic) -> Symbolic:
    """``aten::cross_entropy_loss`` of float64 class scores (no label smoothing): ``nll_loss`` of the
    ``log_softmax`` above over dim 1, which is eager's definition."""

    def symbolic(g, self, target, weight, reduction, ignore_index, label_smoothing):
        smoothing = None if is_none(label_smoothing) else constant(label_smoothing)
        if scalar_type(self) != "Double" or (rank(self) or 0) < 2 or smoothing not in (None, 0, 0.0):
            return original(g, self, target, weight, reduction, ignore_index, label_smoothing)
        from torch.onnx._internal.torchscript_exporter import symbolic_opset12

        return symbolic_opset12.nll_loss(g, _log_softmax(g, self, 1), target, weight, reduction, ignore_index)

    return symbolic


def celu_like(original: Symbolic) -> Symbolic:
    """``aten::celu`` of float64: ``x`` itself where ``x > 0`` (eager's ``max(0, x) + min(0, ...)``)."""

    def symbolic(g, self, *args):
        result = original(g, self, *args)
        if scalar_type(self) != "Double":
            return result
        zero = g.op("Constant", value_t=torch.tensor(0.0, dtype=torch.float64))
        return g.op("Where", g.op("Greater", self, zero), self, result)

    return symbolic


WRAPPERS: dict[str, Callable[[Symbolic], Symbolic]] = {"aten::celu": celu_like, "aten::log_softmax": log_softmax_like,
                                                        "aten::cross_entropy_loss": cross_entropy_like}
__all__ = ["WRAPPERS"]
