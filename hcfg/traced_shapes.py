"""Whether a tensor that Python reads while the TorchScript tracer runs holds a
function of shapes only (``batch_size = x.size(0)`` is a traced 0-d tensor then).

Assumes: called during ``torch.onnx.export``'s trace (``torch._C._get_tracing_state()``
is set); the traced graph records how each tensor was computed. Guarantees: True
only where every path from the value back to its sources ends at a shape read
(``aten::size``, ``aten::dim``) or a constant, through deterministic nodes; a graph
input, a parameter, a random or unknown node makes it False. Such a value is fixed
once the traced inputs' sizes are (``dycl.backends.onnx_export`` pins them).
"""

from __future__ import annotations

from typing import Any

import torch

_SHAPE_READS = frozenset({"aten::size", "aten::dim", "aten::numel"})
_CONSTANTS = frozenset({"prim::Constant", "onnx::Constant"})
_MAX_NODES = 10_000


def reads_only_shapes(tensor: Any) -> bool:
    """See the module note; False outside a trace or for a tensor the trace does not know."""
    if not isinstance(tensor, torch.Tensor) or torch._C._get_tracing_state() is None:
        return False
    try:
        start = torch._C._get_value_trace(tensor)
    except RuntimeError:  # not produced by the trace (a tensor made outside it)
        return False
    pending, seen = [start], set()
    while pending:
        value = pending.pop()
        if value.unique() in seen:
            continue
        seen.add(value.unique())
        if len(seen) > _MAX_NODES:
            return False
        node = value.node()
        kind = node.kind()
        if kind in _SHAPE_READS or kind in _CONSTANTS:
            continue
        inputs = list(node.inputs())
        if not inputs or kind == "prim::Param" or node.isNondeterministic():
            return False
        pending.extend(inputs)
    return True


__all__ = ["reads_only_shapes"]
