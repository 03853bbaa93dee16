"""Whether a tensor that Python reads while the TorchScript tracer runs holds a
function of shapes only (``batch_size = x.size(0)`` is a traced 0-d tensor then).

Assumes: called during ``torch.onnx.export``'s trace (``torch._C._get_tracing_state()``
is set); the traced graph records how each tensor was computed. Guarantees: True
only where every path from the value back to its sources ends at a shape read
(``aten::size``, ``aten::dim``) or a constant, through deterministic nodes, and no
shape read is of a tensor computed (anywhere upstream) by an operator whose output
size depends on data (``nonzero``, boolean masks, ``unique``); a graph input, a
parameter, a random or unknown node makes it False. The caller also runs the code
on fake tensors (``dycl.export.shape_guards``), which fails on any other size taken from
data. Such a value is fixed once the traced inputs' sizes are
(``dycl.backends.onnx_export`` pins them).
"""

from __future__ import annotations

from typing import Any

import torch

_SHAPE_READS = frozenset({"aten::size", "aten::dim", "aten::numel"})
_CONSTANTS = frozenset({"prim::Constant", "onnx::Constant"})
_MAX_NODES = 10_000
#: operators whose output size depends on their input's values
_DATA_SIZED = frozenset({"aten::nonzero", "aten::nonzero_numpy", "aten::argwhere", "aten::masked_select",
                         "aten::unique", "aten::_unique", "aten::_unique2", "aten::unique_consecutive",
                         "aten::unique_dim", "aten::repeat_interleave", "aten::bincount", "aten::where",
                         "aten::index", "aten::item"})


def reads_only_shapes(tensor: Any) -> bool:
    """See the module note; False outside a trace or for a tensor the trace does not know."""
    if not isinstance(tensor, torch.Tensor) or torch._C._get_tracing_state() is None:
        return False
    try:
        start = torch._C._get_value_trace(tensor)
    except RuntimeError:  # not produced by the trace (a tensor made outside it)
        return False
    try:
        return _computed_from_shapes(start)
    except RuntimeError:  # a graph this walk does not understand: not shown to be shapes only
        return False


def _computed_from_shapes(start: Any) -> bool:
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
        if kind in _SHAPE_READS:
            if not _sized_without_data(list(node.inputs())[0]):
                return False
            continue
        if kind in _CONSTANTS:
            continue
        inputs = list(node.inputs())
        if not inputs or kind == "prim::Param" or node.isNondeterministic():
            return False
        pending.extend(inputs)
    return True



def _sized_without_data(value: Any) -> bool:
    """No operator upstream of ``value`` sizes its output by data (``_DATA_SIZED``; an
    input's own size is fine: the host checks it)."""
    pending, seen = [value], set()
    while pending:
        current = pending.pop()
        if current.unique() in seen:
            continue
        seen.add(current.unique())
        if len(seen) > _MAX_NODES:
            return False
        node = current.node()
        if node.kind() in _DATA_SIZED:
            return False
        pending.extend(node.inputs())
    return True


__all__ = ["reads_only_shapes"]
