"""Whether an exported predicated sub-DNN (``dycl.per_sample.predicate``) can run on every
sample of a group: both branches run on every row, so no op may fail, or read a size,
on the data of a sample that took the other branch.

Assumes ``data`` is the single-sample ONNX export of a sub-DNN that ``if_convert`` made.
Guarantees: ``check_predicable`` returns only where every graph input and output has a
static shape, and every node is an op of ``TOTAL`` (defined for any values of its data
inputs: arithmetic, comparisons, convolutions, pooling, normalisation, reductions,
selections) whose operands in ``STATIC_OPERANDS`` (shapes, axes, indices, pads) are computed
from constants and shapes only. Everything else — a ``Gather`` whose indices come from data,
an integer ``Div`` or ``Mod`` (division by zero), ``NonZero``, ``TopK``, a ``Loop``, ``Scan``
or ``If`` — raises ``PredicationRefused``, and the compile starts again with the conditions
routed (``dycl.compiler.compile_model``). So does a graph that costs more than ``PREDICATE_MACS``
per sample, or, holding rejoining gates (``dycl.per_sample.rejoin``), more than
``REJOIN_MACS_PER_GATE`` per sample and gate: there the work routing lets samples skip
outweighs the runs it costs (a count, not a timing: the same compile gives the same artifact).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

import onnx

from dycl.backends.onnx_cost import macs
from dycl.rewriter.errors import UnsupportedError

#: at most this many multiply-accumulates per sample (``dycl.backends.onnx_cost``), a converted
#: graph is kept: its boundaries cost more than the work the exited samples would skip.
#: ``benchmarks/predication_threshold.md`` (default threads, 2-core x86_64, load 1.1-1.5,
#: 2026-11-28; both forms in turns), converted/routed time at batch 8 / 32 / 128: sdn_mobilenet
#: (1.0 M MACs per sample) 0.78 / 0.79 / 0.81, sdn_vgg19 (6.5 M) 0.91 / 0.76 / 0.71, sdn_wrn32_4
#: (18.8 M) 0.74 / 0.88 / 1.07, sdn_resnet56 (31.6 M) 0.76 / 0.97 / 1.19: the limit keeps
#: conversion up to wrn32_4 and routes resnet56, whose samples' saved work wins from batch 32 on.
#: (An earlier measurement with DYCL_THREADS=1 at load 9-10 had put the limit at 3 M: converted/routed
#: 1.25-1.8 for sdn_vgg19 there; one thread pays less for routing's small groups.)
PREDICATE_MACS = 25_000_000
#: at most this many multiply-accumulates per sample for each rejoining gate a converted graph holds
#: (``dycl.per_sample.rejoin``): a converted gate computes its block for the samples that skip it, where
#: routing saves that work for one run more. Measured at batch 32 (median of 30 calls, both forms in turn,
#: 2-core x86_64, 2026-11-28), converted/routed time: 0.66 for a gated residual CNN (65 K per gate) and
#: 0.20 for a gated MLP (tests/per_sample/test_per_sample_rejoin.py); samples/s 0.71 for skipnet_ff
#: (1.3 M per gate) and 0.72 for blockdrop (1.2 M), benchmarks/batch.py at batch 32
REJOIN_MACS_PER_GATE = 250_000

#: ops defined for any values of their inputs (given static shapes)
TOTAL = frozenset({
    "Abs", "Acos", "Acosh", "Add", "And", "ArgMax", "ArgMin", "Asin", "Asinh", "Atan", "Atanh", "AveragePool",
    "BatchNormalization", "Cast", "Ceil", "Celu", "Clip", "Concat", "Constant", "Conv", "ConvTranspose", "Cos",
    "Cosh", "Div", "Dropout", "Elu", "Equal", "Erf", "Exp", "Expand", "Flatten", "Floor", "Gather", "Gelu", "Gemm",
    "GlobalAveragePool", "GlobalMaxPool", "Greater", "GreaterOrEqual", "HardSigmoid", "HardSwish", "Identity",
    "InstanceNormalization", "IsInf", "IsNaN", "LayerNormalization", "LeakyRelu", "Less", "LessOrEqual", "Log",
    "LogSoftmax", "LRN", "MatMul", "Max", "MaxPool", "Mean", "Min", "Mod", "Mul", "Neg", "Not", "Or", "Pad", "Pow",
    "PRelu", "Reciprocal", "ReduceL1", "ReduceL2", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
    "ReduceProd", "ReduceSum", "ReduceSumSquare", "Relu", "Reshape", "Round", "Selu", "Shape", "Sigmoid", "Sign",
    "Sin", "Sinh", "Size", "Slice", "Softmax", "Softplus", "Softsign", "Split", "Sqrt", "Squeeze", "Sub", "Sum",
    "Tan", "Tanh", "Tile", "Transpose", "Unsqueeze", "Where", "Xor",
})
#: op -> positions of its inputs that must be static (not computed from data)
STATIC_OPERANDS = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "Pad": (1, 2, 3), "Split": (1,), "Squeeze": (1,),
    "Unsqueeze": (1,), "Slice": (1, 2, 3, 4), "Gather": (1,), "Clip": (), "ReduceSum": (1,), "ReduceMean": (1,),
    "ReduceMax": (1,), "ReduceMin": (1,), "ReduceProd": (1,), "ReduceL1": (1,), "ReduceL2": (1,),
    "ReduceLogSumExp": (1,), "ReduceSumSquare": (1,),
}
#: ops whose result is static when their inputs' *shapes* are, whatever their values
_SHAPE_READS = frozenset({"Shape", "Size", "Constant"})
_INTEGER = frozenset({onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64,
                      onnx.TensorProto.UINT8, onnx.TensorProto.UINT16, onnx.TensorProto.UINT32,
                      onnx.TensorProto.UINT64})


class PredicationRefused(UnsupportedError):
    """A predicated sub-DNN with an op that may fail on another sample's data."""


def check_predicable(data: bytes, where: str, shapes: Mapping[str, tuple[int, ...]] | None = None,
                     gates: int = 0) -> None:
    """Raise ``PredicationRefused`` unless the graph ``data`` runs on any row's data (module
    docstring) and, given its inputs' ``shapes``, costs at most ``PREDICATE_MACS`` per sample
    and, where it holds ``gates`` rejoining gates, ``REJOIN_MACS_PER_GATE`` per sample and gate."""
    model = onnx.load_model_from_string(data)
    with contextlib.suppress(Exception):  # without inferred types, every Div and Mod counts as an integer one
        model = onnx.shape_inference.infer_shapes(model)
    graph = model.graph
    for value in list(graph.input) + list(graph.output):
        if any(not dim.HasField("dim_value") for dim in value.type.tensor_type.shape.dim):
            _refuse(f"a symbolic dim of {value.name!r}", where)
    types = {v.name: v.type.tensor_type.elem_type for v in list(graph.value_info) + list(graph.input)}
    types.update({i.name: i.data_type for i in graph.initializer})
    static = {i.name for i in graph.initializer} | {""}
    for node in graph.node:
        if node.op_type not in TOTAL:
            _refuse(f"the op {node.op_type}", where)
        if node.op_type in ("Div", "Mod") and types.get(node.input[0]) in _INTEGER | {None}:
            _refuse(f"an integer {node.op_type} (a division by zero fails)", where)
        for position in STATIC_OPERANDS.get(node.op_type, ()):
            if position < len(node.input) and node.input[position] not in static:
                _refuse(f"{node.op_type} with an operand computed from data", where)
        if node.op_type in _SHAPE_READS or all(name in static for name in node.input):
            static.update(node.output)
    if shapes is not None:
        count = macs(data, shapes)
        if count is None or count > PREDICATE_MACS:
            _refuse(f"{'unknown' if count is None else f'{count:,}'} multiply-accumulates per sample (more than "
                    f"{PREDICATE_MACS:,}: routing the samples that exit saves more than the runs it costs)", where)
        if gates and count > REJOIN_MACS_PER_GATE * gates:
            _refuse(f"{count // gates:,} multiply-accumulates per sample and rejoining gate (more than "
                    f"{REJOIN_MACS_PER_GATE:,}: routing the samples that skip a block saves more than the run it "
                    f"costs)", where)


def _refuse(what: str, where: str) -> None:
    raise PredicationRefused(f"if-conversion of {where} with {what}", None,
                             "the conditions stay routed per sample (dycl.per_sample.predicate)")


__all__ = ["PREDICATE_MACS", "REJOIN_MACS_PER_GATE", "STATIC_OPERANDS", "TOTAL", "PredicationRefused",
           "check_predicable"]
