"""``torch.tensor_split`` at split points computed from data (``tensor_split(x, [int(i)])``).

A list of indices with an index the exporter does not know (a number the host passes in, a size)
reaches torch's translation as a list value, neither the constant list nor the 1-d tensor it
handles, so it took the list for a *number of sections* and emitted a ``Tile`` that ONNX Runtime
rejects. Here such a list gives ``len(indices) + 1`` slices ``x[0:i0], x[i0:i1], ..., x[ik:]`` along
``dim`` with ``Slice``, whose start and end are clamped and wrapped as Python's slicing does and
as eager's ``tensor_split`` does (negative indices count from the end; an index past the end, or
below the previous one, gives an empty part). A number of sections computed from data is refused
(the parts' count, fixed by the unpacking the graph was traced with, would follow the example).

Assumes: arguments as the TorchScript exporter passes them (``onnx_graph_values``). Guarantees:
constant indices or sections and a 1-d index tensor keep torch's translation.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch

from dycl.backends.onnx_graph_values import SymbolicUnsupported, int_constant, rank

Symbolic = Callable[..., Any]
_ONNX_INT64 = 7


def _int64s(g, values: list[int]):
    return g.op("Constant", value_t=torch.tensor(values, dtype=torch.int64))


def _is_constant(value: Any) -> bool:
    return value.node().kind() in ("onnx::Constant", "prim::Constant")


def tensor_split_like(original: Symbolic) -> Symbolic:
    """``aten::tensor_split(x, indices_or_sections, dim)``."""

    def symbolic(g, self, indices_or_sections, dim, _outputs=None):
        node = indices_or_sections.node()
        if node.kind() == "prim::ListConstruct" and not all(_is_constant(v) for v in node.inputs()):
            parts = _split_at(g, self, list(node.inputs()), int_constant(dim, "tensor_split", "dim"))
            # one list value unless the exporter unpacks it for us (``_outputs``, as torch's ``split``)
            return parts if _outputs is not None else g.op("SequenceConstruct", *parts)
        if not _is_constant(indices_or_sections) and rank(indices_or_sections) in (0, None):
            raise SymbolicUnsupported("tensor_split", "a number of sections computed from data")
        return original(g, self, indices_or_sections, dim, _outputs)

    return symbolic


def _split_at(g, self, indices: list, dim: int) -> list:
    axes = _int64s(g, [dim])
    start, parts = _int64s(g, [0]), []
    for index in indices:
        end = g.op("Reshape", g.op("Cast", index, to_i=_ONNX_INT64), _int64s(g, [1]))
        parts.append(g.op("Slice", self, start, end, axes))
        start = end
    parts.append(g.op("Slice", self, start, _int64s(g, [sys.maxsize]), axes))
    return parts


WRAPPERS: dict[str, Callable[[Symbolic], Symbolic]] = {"aten::tensor_split": tensor_split_like}

__all__ = ["WRAPPERS"]
