"""``squeeze()`` without a dim on a tensor with a symbolic dim: its rank follows the call's sizes.

The TorchScript exporter writes ``x.squeeze()`` as an ONNX ``Squeeze`` with no axes, which drops
every dim that is 1 *at run time*. Where a dim is symbolic (the batch), the graph's output then has
the rank of the call's sizes, not the rank the host and the next sub-DNN were compiled for: a
model compiled at a batch of 2 crashed at a batch of 1 with an ONNX Runtime rank error.

``pin_squeezes`` gives each such ``Squeeze`` the axes it has on the example (the dims that are 1
there) and returns one ``ShapeGuard`` per symbolic dim of its input: ``(dim != 1)``, or ``(dim ==
1)`` where the example's size is 1 and the dim is squeezed. The host refuses the other side of 1
by name (or runs a graph traced there, where one is made: ``dycl.export.alternatives``) instead
of a graph of another rank running on.

Assumes: ONNX shape inference names a symbolic dim of the squeezed tensor by the input dim it
comes from (``dynamic_axes``' names), as it does through elementwise ops, MatMul/Gemm and
reshapes that keep the dim. Guarantees: where every symbolic dim reaching an axis-less
``Squeeze`` is such a name, the graph squeezes exactly the example's axes and the guards hold
exactly where eager squeezes the same axes. Where shape inference lost a dim, the ``Squeeze``
is left as it was (it squeezes as eager does; a rank the next sub-DNN was not compiled for is
then an ONNX Runtime error at that call, never a wrong answer). A graph traced at other sizes
(an alternative) whose outputs lose a rank its ports have raises ``UnsupportedError``.
"""

from __future__ import annotations

from collections.abc import Mapping

import libcst as cst
import numpy as np
import onnx
from onnx import numpy_helper

from dycl.export.subdnn import SubDNNModule
from dycl.hcfg.ports import Variant
from dycl.hostgen.manifest import ShapeGuard
from dycl.rewriter.errors import SourceLocation, UnsupportedError
from dycl.rewriter.walk import descendants


def pin_squeezes(data: bytes, module: SubDNNModule, variant: Variant,
                 dynamic_axes: Mapping[str, Mapping[int, str]]) -> tuple[bytes, tuple[ShapeGuard, ...]]:
    """``data`` with every axis-less ``Squeeze`` of a tensor with symbolic dims given the example's
    axes, and the guards that keep them (see the module note); ``data`` itself where there is none."""
    model = onnx.load_from_string(data)
    loose = [node for node in model.graph.node if node.op_type == "Squeeze" and len(node.input) == 1]
    if not loose or not dynamic_axes:
        return data, ()
    shapes = _inferred_shapes(model)
    bound = {dim: (position, axis) for position, port in enumerate(variant.inputs)
             for axis, dim in dynamic_axes.get(port.name, {}).items()}
    where = _squeeze_location(module)
    guards: dict[str, ShapeGuard] = {}
    changed = False
    for node in loose:
        dims = shapes.get(node.input[0])
        if dims is None or all(isinstance(size, int) for size in dims):
            continue
        if any(not isinstance(size, int) and size not in bound for size in dims):
            continue  # a dim shape inference lost: the Squeeze stays as the exporter wrote it (the note)
        example = {size: _example_size(variant, *bound[size]) for size in dims if isinstance(size, str)}
        for size, at in example.items():  # the example's side of 1: a squeezed dim stays 1, a kept one stays not
            text = f"({size} == 1)" if at == 1 else f"({size} != 1)"
            guards.setdefault(text, ShapeGuard(text, {size: bound[size]}, str(where or "an unknown line")))
        axes = [axis for axis, size in enumerate(dims) if size == 1 or example.get(size) == 1]
        _give_axes(model.graph, node, axes)
        changed = True
    if changed:
        _check_ranks(model, variant, where)
    return (model.SerializeToString() if changed else data), tuple(guards.values())


def _check_ranks(model: onnx.ModelProto, variant: Variant, where: SourceLocation | None) -> None:
    """``UnsupportedError`` where an output's rank is not its port's: traced at a size of 1 (a graph
    for another size, ``dycl.export.alternatives``), ``squeeze()`` dropped a dim the ports keep."""
    shapes = _inferred_shapes(model)
    for port in variant.outputs:
        dims = shapes.get(port.name)
        if port.kind == "tensor" and dims is not None and len(dims) != len(port.shape):
            raise UnsupportedError(f"squeeze() without a dim gives {port.name} {len(dims)} dims at these sizes "
                                   f"and {len(port.shape)} at the compiled ones", where,
                                   "name the dims to drop (x.squeeze(-1)), or compile with dynamic=False")


def _example_size(variant: Variant, position: int, axis: int) -> int:
    return int(variant.examples[0][position].shape[axis])


def _inferred_shapes(model: onnx.ModelProto) -> dict[str, list[int | str | None]]:
    """Each value's dims after ONNX shape inference: a size, a dim name, or None (unknown)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes: dict[str, list[int | str | None]] = {}
    for value in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        tensor = value.type.tensor_type
        if tensor.HasField("shape"):
            shapes[value.name] = [dim.dim_value if dim.HasField("dim_value") else (dim.dim_param or None)
                                  for dim in tensor.shape.dim]
    return shapes


def _give_axes(graph: onnx.GraphProto, node: onnx.NodeProto, axes: list[int]) -> None:
    """``node`` squeezes ``axes`` (an opset-13+ ``Squeeze`` takes them as an input); none: an ``Identity``."""
    if not axes:
        node.op_type = "Identity"
        return
    name = f"{node.output[0]}__dycl_squeeze_axes"
    graph.initializer.append(numpy_helper.from_array(np.array(axes, dtype=np.int64), name))
    node.input.append(name)


def _squeeze_location(module: SubDNNModule) -> SourceLocation | None:
    """The user's file:line of the sub-DNN's first statement calling ``squeeze`` with no dim."""
    for statement in module.variant.sub.statements:
        for node in descendants(statement):
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                    and node.func.attr.value == "squeeze" and len(node.args) == _receiver_args(node.func):
                return module.location_of(statement)
    return None


def _receiver_args(func: cst.Attribute) -> int:
    """How many arguments a dim-less ``squeeze`` call has: ``torch.squeeze(x)`` one, ``x.squeeze()`` none."""
    return 1 if isinstance(func.value, cst.Name) and func.value.value == "torch" else 0


__all__ = ["pin_squeezes"]
