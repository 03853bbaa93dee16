"""How much arithmetic an ONNX graph does at given input shapes, and whether it is small
enough to run on the calling thread.

A pool thread costs a wake-up and a hand-off on every run (tens of microseconds), which a
graph of a few thousand multiply-accumulates cannot earn back: such a graph runs faster on
the thread that calls it (``intra_op_num_threads=1``: ONNX Runtime then starts no pool).

Assumes the graph's input shapes are those of one example (``shapes``); counts the
multiply-accumulates (MACs) of the operators that dominate a network (convolutions, matrix
products, recurrent layers) from ONNX shape inference, and treats every other operator as
free. Guarantees: ``None`` wherever a counted operator's shapes are not all known (a size
that comes from data, a loop or sub-graph), so an unknown cost never picks the calling
thread; the count is a pure function of the graph and the shapes (no timing: the same
compile gives the same artifact).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import onnx
from onnx import shape_inference

#: at most this many MACs at the example's shapes: the graph runs on the calling thread
#: (about 0.1 ms of single-threaded work on a current x86 core, where a pool wake-up and
#: hand-off cost 10-50 µs and two cores can save at most half)
CALLING_THREAD_MACS = 1_000_000

_SUB_GRAPH_OPS = frozenset({"Loop", "Scan", "If"})


def _shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...] | None]:
    known: dict[str, tuple[int, ...] | None] = {}
    for value in (*model.graph.input, *model.graph.value_info, *model.graph.output):
        dims = value.type.tensor_type.shape.dim
        known[value.name] = (tuple(d.dim_value for d in dims) if all(d.HasField("dim_value") for d in dims)
                             else None)
    for tensor in model.graph.initializer:
        known[tensor.name] = tuple(tensor.dims)
    return known


def _node_macs(node: onnx.NodeProto, shape: Mapping[str, tuple[int, ...] | None]) -> int | None:
    """The MACs of one node, 0 for an operator not counted, None where a shape is unknown."""
    if node.op_type in _SUB_GRAPH_OPS:
        return None
    if node.op_type not in {"Conv", "ConvTranspose", "MatMul", "Gemm", "LSTM", "GRU", "RNN"}:
        return 0
    inputs = [shape.get(name) for name in node.input[:2]]
    output = shape.get(node.output[0]) if node.output and node.output[0] else None
    if any(s is None for s in inputs) or (output is None and node.op_type not in {"LSTM", "GRU", "RNN"}):
        return None
    data, weight = inputs
    if node.op_type == "Conv":  # weight (Cout, Cin/group, *kernel): each output element sums over the rest
        return math.prod(output) * math.prod(weight[1:])
    if node.op_type == "ConvTranspose":  # weight (Cin, Cout/group, *kernel): each input element spreads
        return math.prod(data) * math.prod(weight[1:])
    if node.op_type in {"MatMul", "Gemm"}:
        inner = data[-1] if node.op_type == "MatMul" or not _attribute(node, "transA") else data[0]
        return math.prod(output) * inner
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[node.op_type]  # per step: gates x hidden x (input + hidden)
    hidden = _attribute(node, "hidden_size")
    sequence, batch, features = data
    directions = weight[0]
    return sequence * batch * directions * gates * hidden * (features + hidden)


def _attribute(node: onnx.NodeProto, name: str) -> int:
    return next((onnx.helper.get_attribute_value(a) for a in node.attribute if a.name == name), 0)


def macs(data: bytes, shapes: Mapping[str, tuple[int, ...]]) -> int | None:
    """The MACs of the ONNX model ``data`` when its graph inputs have ``shapes`` (by input
    name; initializers aside); None where it cannot be known."""
    model = onnx.load_from_string(data)
    initializers = {t.name for t in model.graph.initializer}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        concrete = shapes.get(value.name)
        dims = value.type.tensor_type.shape.dim
        if concrete is None:
            return None
        if len(dims) != len(concrete):
            return None
        for dim, size in zip(dims, concrete):
            dim.Clear()
            dim.dim_value = int(size)
    try:
        inferred = shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # noqa: BLE001 - an operator shape inference does not know: the cost is unknown
        return None
    shape = _shapes(inferred)
    total = 0
    for node in inferred.graph.node:
        cost = _node_macs(node, shape)
        if cost is None:
            return None
        total += cost
    return total


def runs_on_calling_thread(data: bytes, shapes: Mapping[str, tuple[int, ...]]) -> bool:
    """Whether the graph is small enough that a thread pool costs more than it saves."""
    cost = macs(data, shapes)
    return cost is not None and cost <= CALLING_THREAD_MACS


__all__ = ["CALLING_THREAD_MACS", "macs", "runs_on_calling_thread"]
