"""``index_put(..., accumulate=True)`` that sums repeated indices, as eager does.

``y.index_put_((idx,), v, accumulate=True)`` (``torch.Tensor.index_put``, the way code
counts labels or builds a confusion matrix) adds every ``v[k]`` at ``idx[k]``, so an index
that occurs twice gets both. torch's ONNX translation scatters ``v`` into zeros with a
plain ``ScatterND`` and adds that to ``y``: of repeated indices only one value survives
(``[0, 0, 1]`` counted ``[1, 1, 0]`` instead of ``[2, 1, 0]``), silently. With a boolean
mask as the index it replaces the masked elements instead of adding to them.

Here torch's translation runs unchanged, then its ``ScatterND`` is given
``reduction="add"`` (opset 16+), which sums repeated indices into the zeros. Where the
translation is not that ``Add(y, ScatterND(zeros, ...))`` (a boolean mask), the call is
refused as an exporter error naming the operator. ``accumulate=False`` is untouched.

Assumes: arguments as the TorchScript exporter passes them (``onnx_graph_values``);
torch's translation returns its result's ``Value``. Guarantees: the result's type and
shape are torch's translation's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dycl.backends.onnx_graph_values import SymbolicUnsupported, constant

Symbolic = Callable[..., Any]


def index_put_like(original: Symbolic) -> Symbolic:
    """Wrap torch's ``aten::index_put`` translation so that accumulation sums duplicates."""

    def symbolic(g, self, indices, values, accumulate=False):
        result = original(g, self, indices, values, accumulate)
        if not constant(accumulate):
            return result
        node = result.node()
        scatters = [value.node() for value in node.inputs() if value.node().kind() == "onnx::ScatterND"]
        if node.kind() != "onnx::Add" or len(scatters) != 1:
            raise SymbolicUnsupported("index_put", "accumulate=True with this index (a boolean mask?)")
        scatters[0].s_("reduction", "add")
        return result

    return symbolic


WRAPPERS: dict[str, Callable[[Symbolic], Symbolic]] = {"aten::index_put": index_put_like}

__all__ = ["WRAPPERS"]
