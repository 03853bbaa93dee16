"""ONNX translations dycl adds for the duration of one export: operators the
TorchScript exporter (opset 17) has none for.

- ``aten::diff`` (``torch.diff``; transformers computes it for every call without
  an attention mask): ``n == 1`` along ``dim``, with ``prepend``/``append``, as
  ``Slice(x, 1:) - Slice(x, :-1)`` of their concatenation (``Xor`` for bool).

Guarantees: ``local_symbolics()`` registers only operators that have no
translation registered when it is entered (by torch or by the user) and removes
exactly those on exit, so nothing outlives the export.
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


_SYMBOLICS = {"aten::diff": _diff}


@contextlib.contextmanager
def local_symbolics() -> Iterator[None]:
    """Register dycl's translations that are missing, for the ``with`` block only."""
    from torch.onnx._internal.torchscript_exporter import registration

    added = [name for name in _SYMBOLICS if not registration.registry.is_registered_op(name, _OPSET)]
    for name in added:
        torch.onnx.register_custom_op_symbolic(name, _SYMBOLICS[name], _OPSET)
    try:
        yield
    finally:
        for name in added:
            torch.onnx.unregister_custom_op_symbolic(name, _OPSET)


__all__ = ["local_symbolics"]
