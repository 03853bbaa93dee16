"""What a TorchScript-exporter symbolic needs to know about its arguments, read
through the graph API the exporter hands every symbolic (``torch._C.Value`` and
``Node``: ``node().kind()``, ``mustBeNone()``, ``type().scalarType()``/``dim()``).

Assumes: arguments are graph values as ``torch.onnx.register_custom_op_symbolic``
passes them; a Python-number argument of the ATen schema (a ``dim``, a ``dtype``)
arrives as an ``onnx::Constant`` or ``prim::Constant`` node.

Guarantees: nothing here imports ``torch.onnx.symbolic_helper`` (a deprecated shim
whose module object changes when someone imports it by that path), so callers
work whatever was imported first; a non-constant where a constant is needed raises
``SymbolicUnsupported``, an exporter error that names the operator.
"""

from __future__ import annotations

from typing import Any

import torch

# c10::ScalarType code (an ATen ``dtype`` argument) → ONNX TensorProto.DataType.
# Both numberings are part of their formats' stable ABIs.
_ONNX_TYPE_OF_DTYPE_CODE = {
    0: 2,    # uint8
    1: 3,    # int8
    2: 5,    # int16
    3: 6,    # int32
    4: 7,    # int64
    5: 10,   # float16
    6: 1,    # float32
    7: 11,   # float64
    11: 9,   # bool
    15: 16,  # bfloat16
}


class SymbolicUnsupported(torch.onnx.errors.OnnxExporterError):
    """An operator call this translation cannot express (worded as torch's own refusals)."""

    def __init__(self, operator: str, why: str) -> None:
        super().__init__(f"Exporting the operator 'aten::{operator}' to ONNX is not supported: {why}")


def is_none(value: Any) -> bool:
    """Whether an optional argument was left out (``None`` in the ATen call)."""
    return value is None or (isinstance(value, torch._C.Value) and value.node().mustBeNone())


def constant(value: Any) -> Any:
    """The Python value of a constant argument; the argument itself if it is not one."""
    if not isinstance(value, torch._C.Value):
        return value
    node = value.node()
    if node.mustBeNone():
        return None
    if node.kind() == "onnx::Constant":
        # A constant of the graph being translated is not a decision on data: read it
        # where no TorchFunctionMode (dycl's DecisionRecorder watches the export) sees it.
        with torch._C.DisableTorchFunction():
            return node.t("value").tolist()
    if node.kind() == "prim::Constant":
        return value.toIValue()
    return value


def int_constant(value: Any, operator: str, argument: str) -> int:
    """The int a constant argument holds; ``SymbolicUnsupported`` where it is not one."""
    found = constant(value)
    if isinstance(found, bool) or not isinstance(found, int):
        raise SymbolicUnsupported(operator, f"'{argument}' that is not a constant int")
    return found


def scalar_type(value: torch._C.Value) -> str | None:
    """TorchScript's element-type name (``'Bool'``, ``'Long'``, ``'Float'``), None if unknown."""
    kind = value.type()
    return kind.scalarType() if isinstance(kind, torch._C.TensorType) else None


def rank(value: torch._C.Value) -> int | None:
    """The tensor's number of dims, None where the exporter does not know it."""
    kind = value.type()
    return kind.dim() if isinstance(kind, torch._C.TensorType) else None


def onnx_type_of_dtype_code(code: int, operator: str) -> int:
    """The ONNX element type for an ATen ``dtype`` code."""
    if code not in _ONNX_TYPE_OF_DTYPE_CODE:
        raise SymbolicUnsupported(operator, f"dtype code {code} (not a real number type)")
    return _ONNX_TYPE_OF_DTYPE_CODE[code]


__all__ = ["SymbolicUnsupported", "constant", "int_constant", "is_none", "onnx_type_of_dtype_code", "rank",
           "scalar_type"]
