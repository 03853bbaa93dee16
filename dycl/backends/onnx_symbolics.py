"""ONNX translations dycl uses for the duration of one export: operators the
TorchScript exporter (opset 17) has none for, or a wrong one.

- ``aten::diff`` (``torch.diff``; transformers computes it for every call without
  an attention mask): ``n == 1`` along ``dim``, with ``prepend``/``append``, as
  ``Slice(x, 1:) - Slice(x, :-1)`` of their concatenation (``Xor`` for bool).
- ``aten::index_add`` (``out.index_add_(0, token_idx, expert_out)``, how MoE layers
  combine expert outputs): torch's translation is a ``ScatterElements`` without
  reduction, so a token index that occurs twice keeps one of its rows instead of
  their sum (torch only warns). Here: ``ScatterElements(reduction="add")`` with the
  index broadcast to the source's shape, which sums duplicates as eager does.

- ``aten::cumsum`` of bool or small integers (transformers' packed-sequence
  detection, ``(diff != 1).cumsum(-1)``): eager sums them as int64; torch's
  translation gives ONNX Runtime a ``CumSum`` of bool, an invalid model. Cast first.

Guarantees: ``local_symbolics()`` installs a translation only where the user has
registered none of their own (theirs wins), as a custom override that it removes
on exit, so torch's own translations are back and nothing outlives the export.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import torch
from torch.onnx import symbolic_helper

_OPSET = 17


def _constant(g, values: list[int]):
    return g.op("Constant", value_t=torch.tensor(values, dtype=torch.int64))


@symbolic_helper.parse_args("v", "i", "i", "v", "v")
def _diff(g, self, n, dim, prepend, append):
    if n != 1:
        return symbolic_helper._unimplemented("diff", "n other than 1", self)
    parts = [v for v in (prepend, self, append) if not symbolic_helper._is_none(v)]
    values = g.op("Concat", *parts, axis_i=dim) if len(parts) > 1 else self
    axes = _constant(g, [dim])
    later = g.op("Slice", values, _constant(g, [1]), _constant(g, [sys.maxsize]), axes)
    earlier = g.op("Slice", values, _constant(g, [0]), _constant(g, [-1]), axes)
    scalar_types = symbolic_helper._type_utils.JitScalarType
    if scalar_types.from_value(self, scalar_types.UNDEFINED) == scalar_types.BOOL:
        return g.op("Xor", later, earlier)
    return g.op("Sub", later, earlier)


@symbolic_helper.parse_args("v", "i", "v", "v", "v")
def _index_add(g, self, dim, index, source, alpha):
    if not symbolic_helper._is_none(alpha) and symbolic_helper._maybe_get_const(alpha, "f") != 1:
        return symbolic_helper._unimplemented("index_add", "alpha other than 1", self)
    rank = symbolic_helper._get_tensor_rank(self)
    if rank is None or symbolic_helper._get_tensor_rank(source) != rank:
        return symbolic_helper._unimplemented("index_add", "a source of another rank or an unknown rank", self)
    dim = dim % rank if rank else 0
    along = _constant(g, [-1 if axis == dim else 1 for axis in range(rank)])
    index = g.op("Expand", g.op("Reshape", index, along), g.op("Shape", source))
    return g.op("ScatterElements", self, index, source, axis_i=dim, reduction_s="add")


def _cumsum(g, self, dim, dtype=None):
    from torch.onnx._internal.torchscript_exporter import symbolic_opset11

    types = symbolic_helper._type_utils.JitScalarType
    small = (types.BOOL, types.UINT8, types.INT8, types.INT16, types.INT)
    if types.from_value(self, types.UNDEFINED) in small and (dtype is None or symbolic_helper._is_none(dtype)):
        self = g.op("Cast", self, to_i=types.INT64.onnx_type())
    return symbolic_opset11.cumsum(g, self, dim, dtype)


_SYMBOLICS = {"aten::diff": _diff, "aten::index_add": _index_add, "aten::cumsum": _cumsum}


@contextlib.contextmanager
def local_symbolics() -> Iterator[None]:
    """Register dycl's translations that are missing, for the ``with`` block only."""
    from torch.onnx._internal.torchscript_exporter import registration

    added = []
    for name in _SYMBOLICS:
        group = registration.registry.get_function_group(name)
        if group is None or not any(group._functions.overridden(version) for version in group._functions):
            added.append(name)
    for name in added:
        torch.onnx.register_custom_op_symbolic(name, _SYMBOLICS[name], _OPSET)
    try:
        yield
    finally:
        for name in added:
            torch.onnx.unregister_custom_op_symbolic(name, _OPSET)


__all__ = ["local_symbolics"]
