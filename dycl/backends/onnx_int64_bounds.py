"""``minimum``/``maximum`` (and ``max``/``min`` of two tensors) of int64 tensors by comparisons.

ONNX Runtime (1.31) compares int64 in its elementwise ``Clip``, ``Min`` and ``Max`` wrongly
beyond 32 bits: ``Clip([3600000256], -5, 5)`` is ``3600000256`` and ``Max([2**31], 5)`` is
``5`` -- so ``(x * 1e9).long().clamp(-5, 5)`` (timestamps, hashed ids, counts) came back
unclamped, silently. Its ``Less`` is right, so here ``torch.minimum``/``maximum`` of two
integer tensors, one of them int64 (the result type), are a ``Where`` on ``Less``. Other
element types keep torch's translation; ``clamp`` is ``onnx_clamp``'s.

Assumes: arguments as the TorchScript exporter passes them (``onnx_graph_values``).
Guarantees: the result's type and shape are torch's translation's (the broadcast shape).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dycl.backends.onnx_graph_values import scalar_type

Symbolic = Callable[..., Any]
_INTEGERS = frozenset({"Long", "Int", "Short", "Char", "Byte"})
_ONNX_INT64 = 7


def pick(smaller: bool) -> Callable[[Symbolic], Symbolic]:
    """``aten::minimum`` (``smaller``) and ``aten::maximum``."""

    def wrap(original: Symbolic) -> Symbolic:
        def symbolic(g, self, other):
            kinds = {scalar_type(self), scalar_type(other)}
            if "Long" not in kinds or not kinds <= _INTEGERS:
                return original(g, self, other)
            self, other = g.op("Cast", self, to_i=_ONNX_INT64), g.op("Cast", other, to_i=_ONNX_INT64)
            less = g.op("Less", self, other)
            return g.op("Where", less, self, other) if smaller else g.op("Where", less, other, self)

        return symbolic

    return wrap


# Not ``clamp``/``clamp_min``/``clamp_max`` (``onnx_clamp`` builds them without torch's translation:
# run from a custom symbolic, its float clamp comes out as a ``Clip`` with ``min``/``max``
# attributes, which opset 17 does not have).
WRAPPERS: dict[str, Callable[[Symbolic], Symbolic]] = {"aten::minimum": pick(True), "aten::maximum": pick(False)}

__all__ = ["WRAPPERS"]
