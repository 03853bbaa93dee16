"""``F.binary_cross_entropy_with_logits`` computed as eager computes it.

torch's translation is ``-(y * log(sigmoid(x)) + (1 - y) * log(1 - sigmoid(x)))``: ``sigmoid`` rounds
to 1 above about 17 in float32, so an ordinary logit of 20 with target 0 gave a loss of ``inf``
(eager: 20), and a masked logit of ``-inf`` gave ``inf`` (eager: NaN). Here eager's own formula
(ATen's ``binary_cross_entropy_with_logits``)::

    log_weight = (pos_weight - 1) * y + 1            # 1 without pos_weight
    loss = ((1 - y) * x - log_weight * logsigmoid(x)) * weight
    logsigmoid(x) = min(x, 0) - softplus(-|x|)       # ATen's log_sigmoid

NaN where ``x`` is NaN (ORT's ``Min`` need not keep it), then ``reduction`` 0/1/2 as none/mean/sum.

Assumes: arguments as the TorchScript exporter passes them (``onnx_graph_values``); a constant
``reduction``. Guarantees: the result has torch's translation's type and shape.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from dycl.backends.onnx_graph_values import constant, is_none, scalar_type

Symbolic = Callable[..., Any]
_FLOATING = frozenset({"Float", "Double", "Half", "BFloat16"})


def _like(g, number: float, value):
    return g.op("CastLike", g.op("Constant", value_t=torch.tensor(number)), value)


def _log_sigmoid(g, x):
    low = g.op("Min", x, _like(g, 0.0, x))
    return g.op("Sub", low, g.op("Softplus", g.op("Neg", g.op("Abs", x))))


def bce_with_logits_like(original: Symbolic) -> Symbolic:
    """``aten::binary_cross_entropy_with_logits(x, y, weight, pos_weight, reduction)``."""

    def symbolic(g, self, target, weight, pos_weight, reduction):
        how = constant(reduction)
        if scalar_type(self) not in _FLOATING or how not in (0, 1, 2):
            return original(g, self, target, weight, pos_weight, reduction)
        one = _like(g, 1.0, self)
        log_weight = one if is_none(pos_weight) else \
            g.op("Add", g.op("Mul", g.op("Sub", pos_weight, one), target), one)
        loss = g.op("Sub", g.op("Mul", g.op("Sub", one, target), self),
                    g.op("Mul", log_weight, _log_sigmoid(g, self)))
        if not is_none(weight):
            loss = g.op("Mul", loss, weight)
        loss = g.op("Where", g.op("IsNaN", self), self, loss)
        if how == 0:
            return loss
        return g.op("ReduceMean" if how == 1 else "ReduceSum", loss, keepdims_i=0)

    return symbolic


WRAPPERS: dict[str, Callable[[Symbolic], Symbolic]] = {
    "aten::binary_cross_entropy_with_logits": bce_with_logits_like}

__all__ = ["WRAPPERS"]
