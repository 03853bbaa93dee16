"""Refuse, at export, ONNX operators that ONNX Runtime's CPU provider cannot run on float64.

ONNX Runtime registers no float64 CPU kernel for some operators (``Tan``, ``Erf``, ``Softplus``,
``AveragePool`` ...): a sub-DNN that applies one to a float64 tensor exported fine and then failed
to load (``NOT_IMPLEMENTED: Could not find an implementation for Erf(13)``), a crash far from the
user's code. ``refuse_float64_gaps`` reads the exported graph and raises ``UnsupportedError``
naming the operator, the type and the statement that computes it (the first call of one of the
PyTorch functions that translate to it, found as ``export_errors`` finds an untranslatable one).

Assumes: the graph as the TorchScript exporter writes it, with the element types of inputs,
initializers and intermediate values (``value_info``, completed by ONNX shape inference); an
operator whose input type is still unknown is let through (ONNX Runtime's own load error then stands). Guarantees: never
refuses an operator applied to float32 or any other type than float64; the table is ONNX
Runtime 1.31's CPU provider, kept honest by ``tests/compile/test_op_edge_sweep.py``.
"""

from __future__ import annotations

import onnx

from dycl.backends.export_errors import call_site
from dycl.export.subdnn import SubDNNModule, Variant
from dycl.rewriter.errors import UnsupportedError

#: ONNX operator -> the PyTorch functions (``__name__`` as ``TorchFunctionMode`` sees them) that
#: the exporter translates to it, for finding the user's statement
MISSING_FLOAT64: dict[str, tuple[str, ...]] = {
    "Tan": ("tan",), "Atan": ("atan", "arctan", "atan2", "arctan2"), "Asin": ("asin", "arcsin"),
    "Erf": ("erf", "gelu"), "Softplus": ("softplus", "mish", "binary_cross_entropy_with_logits", "logsigmoid"),
    "HardSigmoid": ("hardsigmoid", "hardswish"), "HardSwish": ("hardswish",), "Elu": ("elu", "celu"), "Selu": ("selu",),
    "GlobalAveragePool": ("adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d"),
    "AveragePool": ("avg_pool1d", "avg_pool2d", "avg_pool3d", "lp_pool1d", "lp_pool2d", "adaptive_avg_pool1d",
                    "adaptive_avg_pool2d"),
    "InstanceNormalization": ("group_norm", "instance_norm"), "Resize": ("interpolate", "upsample"),
}


def _element_types(graph: onnx.GraphProto) -> dict[str, int]:
    types = {info.name: info.type.tensor_type.elem_type for info in (*graph.input, *graph.value_info, *graph.output)}
    types.update({tensor.name: tensor.data_type for tensor in graph.initializer})
    return types


def float64_gap(graph: onnx.GraphProto) -> str | None:
    """The first operator of ``graph`` (``If`` bodies included) applied to float64 that ONNX Runtime
    cannot run, or None."""
    types = _element_types(graph)
    for node in graph.node:
        if node.op_type in MISSING_FLOAT64 and node.input and types.get(node.input[0]) == onnx.TensorProto.DOUBLE:
            return node.op_type
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH and (found := float64_gap(attribute.g)):
                return found
    return None


def _uses_any(graph: onnx.GraphProto) -> bool:
    return any(node.op_type in MISSING_FLOAT64 or any(a.type == onnx.AttributeProto.GRAPH and _uses_any(a.g)
                                                     for a in node.attribute) for node in graph.node)


def refuse_float64_gaps(data: bytes, module: SubDNNModule, variant: Variant) -> None:
    """Raise ``UnsupportedError`` where the ONNX model ``data`` applies an operator of ``MISSING_FLOAT64``
    to float64 (types the exporter left out are inferred, only where such an operator occurs)."""
    model = onnx.load_from_string(data)
    if not _uses_any(model.graph):
        return
    operator = float64_gap(onnx.shape_inference.infer_shapes(model).graph)
    if operator is None:
        return
    statement, inside = call_site(module, variant, list(MISSING_FLOAT64[operator]))
    raise UnsupportedError(
        f"the ONNX operator {operator} on float64 (ONNX Runtime has no float64 CPU kernel for it){inside}",
        module.location_of(statement),
        "compute this part in float32 (`.float()` before it, `.double()` after), or compile with "
        "backend='torch' to run it eagerly in-process")


__all__ = ["MISSING_FLOAT64", "float64_gap", "refuse_float64_gaps"]
