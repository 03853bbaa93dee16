"""A sum or product over a dim of size 0: eager's identity (0, 1), not ONNX Runtime's empty result.

ONNX Runtime's ``ReduceSum``/``ReduceProd`` over an axis of size 0 return a tensor that keeps the
empty axis (``x[:, :0].sum(-1)`` gave shape ``(1, 0)``, not eager's ``(1,)`` of zeros; with
``keepdim=True`` a later node failed re-using a buffer). The exporter's translation is right
(explicit axes, ``noop_with_empty_axes=0``); the run time is not.

``pad_empty_reductions`` pads each such node's input with one element of the reduction's
identity (0 for a sum, 1 for a product) at the end of every reduced axis. The reduction then
never sees an empty axis, and adds ``0`` (multiplies by ``1``) last where it does: the value is
eager's exactly, on every size.

``ReduceMax``/``ReduceMin`` (``amax``/``amin``/``max(dim)``) over an empty dim raise in eager;
their input gets the first element of each reduced axis repeated at its end (the same extreme),
read by a ``Gather`` that fails out of bounds where the axis is empty: an error, never an empty
result passed on.

Assumes: the graph is opset 17 (``ReduceSum`` axes as a constant input, ``ReduceProd`` axes as an
attribute) and shape inference knows the input's rank. Guarantees: a node whose axes or rank is
not known, or whose reduced axes all have a static size of at least 1, is left as it was (no cost
on graphs whose reductions cannot see an empty axis); the others compute eager's value and shape
on empty and non-empty axes.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

_IDENTITY = {"ReduceSum": 0.0, "ReduceProd": 1.0}
_EXTREMES = frozenset({"ReduceMax", "ReduceMin"})


def pad_empty_reductions(data: bytes) -> bytes:
    """``data`` (a serialized ONNX model) with every sum/product padded by its identity (module note)."""
    model = onnx.load_from_string(data)
    if not any(n.op_type in _IDENTITY or n.op_type in _EXTREMES for n in model.graph.node):
        return data
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes = {v.name: v.type.tensor_type.shape.dim for v in (*inferred.graph.value_info, *inferred.graph.input)
              if v.type.tensor_type.HasField("shape")}
    ranks = {name: len(dims) for name, dims in shapes.items()}
    types = {v.name: v.type.tensor_type.elem_type for v in (*inferred.graph.value_info, *inferred.graph.input)}
    constants = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    constants.update({n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in model.graph.node
                      if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value"})
    nodes: list[onnx.NodeProto] = []
    changed = False
    for index, node in enumerate(model.graph.node):
        axes = _axes(node, constants)
        rank = ranks.get(node.input[0]) if node.op_type in {*_IDENTITY, *_EXTREMES} else None
        if axes is None or rank is None or node.input[0] not in types or _never_empty(shapes[node.input[0]], axes):
            nodes.append(node)
            continue
        if node.op_type in _EXTREMES:
            nodes.extend(_first_repeated(node, index, axes, model))
        else:
            nodes.extend(_padded(node, index, axes, rank, types[node.input[0]], model))
        changed = True
    if not changed:
        return data
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return model.SerializeToString()


def _never_empty(dims, axes: list[int]) -> bool:
    """Whether every reduced axis has a static size of at least 1 (no repair needed: the common case)."""
    if not dims:
        return False
    sizes = [dims[axis % len(dims)] for axis in axes]
    return all(size.HasField("dim_value") and size.dim_value > 0 for size in sizes)


def _axes(node: onnx.NodeProto, constants: dict) -> list[int] | None:
    """The node's reduced axes where they are constant and not empty; None otherwise."""
    if node.op_type not in _IDENTITY and node.op_type not in _EXTREMES:
        return None
    attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if node.op_type == "ReduceSum":
        if len(node.input) < 2 or node.input[1] not in constants:
            return None
        axes = [int(a) for a in constants[node.input[1]].reshape(-1)]
    else:
        axes = list(attributes.get("axes", []))
    return axes or None


def _padded(node: onnx.NodeProto, index: int, axes: list[int], rank: int, elem_type: int,
            model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """A ``Pad`` of one identity element at the end of each of ``axes``, then ``node`` on it."""
    pads = [0] * (2 * rank)
    for axis in axes:
        pads[rank + axis % rank] = 1
    prefix = f"dycl_empty_reduction_{index}"
    model.graph.initializer.append(numpy_helper.from_array(np.array(pads, dtype=np.int64), f"{prefix}_pads"))
    dtype = helper.tensor_dtype_to_np_dtype(elem_type)
    model.graph.initializer.append(numpy_helper.from_array(np.array(_IDENTITY[node.op_type], dtype=dtype),
                                                           f"{prefix}_value"))
    pad = helper.make_node("Pad", [node.input[0], f"{prefix}_pads", f"{prefix}_value"], [f"{prefix}_padded"],
                           mode="constant", name=f"{prefix}_pad")
    reduced = onnx.NodeProto()
    reduced.CopyFrom(node)
    reduced.input[0] = f"{prefix}_padded"
    return [pad, reduced]


def _first_repeated(node: onnx.NodeProto, index: int, axes: list[int],
                    model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """``node`` on its input with the first element of each reduced axis repeated at its end: the
    same max/min, and a ``Gather`` out of bounds (an ONNX Runtime error, as eager raises) where an
    axis is empty."""
    prefix = f"dycl_empty_reduction_{index}"
    model.graph.initializer.append(numpy_helper.from_array(np.array([0], dtype=np.int64), f"{prefix}_first"))
    nodes: list[onnx.NodeProto] = []
    current = node.input[0]
    for position, axis in enumerate(axes):
        first, joined = f"{prefix}_first_{position}", f"{prefix}_joined_{position}"
        nodes.append(helper.make_node("Gather", [current, f"{prefix}_first"], [first], axis=axis,
                                      name=f"{prefix}_gather_{position}"))
        nodes.append(helper.make_node("Concat", [current, first], [joined], axis=axis,
                                      name=f"{prefix}_concat_{position}"))
        current = joined
    reduced = onnx.NodeProto()
    reduced.CopyFrom(node)
    reduced.input[0] = current
    return [*nodes, reduced]


__all__ = ["pad_empty_reductions"]
