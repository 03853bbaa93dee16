"""Fold the shape arithmetic of a statically shaped ONNX graph into constants.

The TorchScript exporter leaves ``Shape -> Gather -> Div -> Slice`` chains in
a graph even where every shape is static (``tensor.chunk``, ``x.size(-1)``):
shape inference then cannot give the sliced values a shape, and the row proof
(``dycl.per_sample.row_independence``) cannot see that a ``Shape`` is one sample's.

Assumes: ``onnx.shape_inference`` infers the shapes it reports correctly.
Guarantees: the returned graph computes what ``model`` computes (same inputs,
outputs and names): a ``Shape``/``Size`` of a value whose shape is fully
static becomes its constant, and a deterministic default-domain node whose
inputs are all constants and whose outputs are small (``LIMIT`` elements; the
shape arithmetic, not the weights) becomes the constants the ONNX reference
implementation computes for it. Nothing else changes.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

#: the most elements a folded node may produce (shape vectors and scalars, never weights)
LIMIT = 64
_KEEP = frozenset(["Bernoulli", "Dropout", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform",
                   "RandomUniformLike", "Constant"])


def _static_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    shapes = {}
    for value in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        tensor = value.type.tensor_type
        if value.type.HasField("tensor_type") and tensor.HasField("shape") and all(
                d.HasField("dim_value") for d in tensor.shape.dim):
            shapes[value.name] = tuple(d.dim_value for d in tensor.shape.dim)
    return shapes


def _evaluate(node: onnx.NodeProto, values: list[np.ndarray], opsets) -> list[np.ndarray] | None:
    inputs = [helper.make_tensor_value_info(f"in_{i}", helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
              for i, v in enumerate(values)]
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    names = {name: f"in_{i}" for i, name in enumerate(n for n in node.input if n)}
    copy.input[:] = [names.get(name, "") for name in node.input]
    outputs = [helper.make_empty_tensor_value_info(name) for name in node.output if name]
    model = helper.make_model(helper.make_graph([copy], "fold", inputs, outputs), opset_imports=opsets)
    try:
        return ReferenceEvaluator(model).run(None, {f"in_{i}": v for i, v in enumerate(values)})
    except Exception:  # an op or case the reference implementation lacks: leave the node as it is
        return None


def fold_static_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with its static shape arithmetic folded (module docstring); ``model`` itself is unchanged."""
    shapes = _static_shapes(model)
    constants = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    folded = onnx.ModelProto()
    folded.CopyFrom(model)
    opsets = list(model.opset_import)
    changed = False
    for node in folded.graph.node:
        if node.op_type == "Constant" and len(node.attribute) == 1 and node.attribute[0].name == "value":
            constants[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
            continue
        if node.domain not in ("", "ai.onnx") or node.op_type in _KEEP or any(
                a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
            continue
        outputs = [name for name in node.output if name]
        results = _fold(node, shapes, constants, opsets) if len(outputs) == 1 else None
        if results is None or len(results) != 1 or np.asarray(results[0]).size > LIMIT:
            continue
        constants[outputs[0]] = value = np.asarray(results[0])
        node.CopyFrom(helper.make_node("Constant", [], outputs, value=numpy_helper.from_array(value)))
        changed = True
    return folded if changed else model


def _fold(node, shapes, constants, opsets) -> list[np.ndarray] | None:
    if node.op_type in ("Shape", "Size"):
        shape = shapes.get(node.input[0])
        if shape is None:
            return None
        if node.op_type == "Size":
            return [np.array(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)]
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        return [np.array(shape, dtype=np.int64)[attributes.get("start", 0):attributes.get("end", len(shape))]]
    inputs = [name for name in node.input if name]
    if not inputs or any(name not in constants for name in inputs):
        return None
    return _evaluate(node, [constants[name] for name in inputs], opsets)


__all__ = ["LIMIT", "fold_static_shapes"]
