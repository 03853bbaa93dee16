"""Symbolic dims that an ONNX graph pins to one size, made static for TVM's importer.

A user may mark a dim symbolic (``dynamic="all"``) that the model's weights pin: the
contracted dim of a matrix product with a weight (``nn.Linear``'s in-features, a
recurrent cell's hidden size), the input channels of a convolution. Eager PyTorch fails
for any other size, so the dim is static in all but name. TVM's Relax importer cannot
prove it: an elementwise op between the input ``(b, f)`` and a weight-shaped value
``(b, 4)`` gets a tensor of unknown shape, and the converters that need a shape fail
(``ArgMax``: ``len(data.ty.shape)`` of None; issue 29, a greedy decoder with
``dynamic="all"``).

Assumes: ONNX shape inference carries the graph inputs' dim names (``dim_param``) to the
values computed from them where it can. Guarantees: a dim name is pinned only where it
meets a static size as the contracted dim of ``MatMul``/``Gemm`` or the input channels of
``Conv``, alone or as the one named part of a ``Concat`` along that dim (every meeting
agreeing on that size); names that a ``Concat`` requires equal (the dims off its axis)
become one name; every other dim stays as it was; the pinned
graph computes the same as the original for every input whose sizes the original accepts
(an input of another size fails in both, as it does in eager).
"""

from __future__ import annotations

from collections.abc import Iterator

import onnx
from onnx import shape_inference

Dim = int | str | None


def _dims(model: onnx.ModelProto) -> dict[str, list[Dim]]:
    """Every value's dims after ONNX shape inference: an int, a dim name, or None (unknown)."""
    try:
        inferred = shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # noqa: BLE001 - an operator inference does not know: only what the graph states
        inferred = model
    graph = inferred.graph
    known: dict[str, list[Dim]] = {}
    for value in (*graph.input, *graph.value_info, *graph.output):
        if value.type.tensor_type.HasField("shape"):
            known[value.name] = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                                 for d in value.type.tensor_type.shape.dim]
    for tensor in graph.initializer:
        known[tensor.name] = list(tensor.dims)
    return known


def _attribute(node: onnx.NodeProto, name: str, default: int) -> int:
    return next((onnx.helper.get_attribute_value(a) for a in node.attribute if a.name == name), default)


def _meetings(node: onnx.NodeProto, dims: dict[str, list[Dim]]) -> Iterator[tuple[Dim, Dim]]:
    """Pairs of dims that ``node`` requires to be equal (its contracted or channel dims)."""
    shapes = [dims.get(name) for name in node.input[:2]]
    if len(shapes) < 2 or any(not shape for shape in shapes):
        return
    a, b = shapes
    if node.op_type == "MatMul" and len(a) >= 1 and len(b) >= 1:
        yield a[-1], (b[-2] if len(b) >= 2 else b[0])
    elif node.op_type == "Gemm" and len(a) == 2 and len(b) == 2:
        yield a[0 if _attribute(node, "transA", 0) else 1], b[1 if _attribute(node, "transB", 0) else 0]
    elif node.op_type == "Conv" and len(a) >= 2 and len(b) >= 2 and isinstance(b[1], int):
        yield a[1], b[1] * _attribute(node, "group", 1)


def _contracted_axis(node: onnx.NodeProto, rank: int) -> int | None:
    """The axis of ``node``'s first input that its contracted (or channel) dim is on."""
    if node.op_type == "MatMul":
        return rank - 1
    if node.op_type == "Gemm":
        return 0 if _attribute(node, "transA", 0) else 1
    return 1 if node.op_type == "Conv" else None


def _concatenated(node: onnx.NodeProto, dims: dict[str, list[Dim]],
                  producers: dict[str, onnx.NodeProto]) -> list[Dim] | None:
    """The parts of the contracted dim of ``node``'s first input where a ``Concat`` along that
    axis produced it (``torch.cat([embedding, context], 1)`` before a Linear), else None."""
    concat = producers.get(node.input[0]) if node.input else None
    shape = dims.get(node.input[0]) if node.input else None
    if concat is None or concat.op_type != "Concat" or not shape:
        return None
    axis = _contracted_axis(node, len(shape))
    along = _attribute(concat, "axis", 0)
    if axis is None or (along + len(shape) if along < 0 else along) != axis:
        return None
    parts = [dims.get(name) for name in concat.input]
    if any(not part or len(part) != len(shape) for part in parts):
        return None
    return [part[axis] for part in parts]


def forced_dims(model: onnx.ModelProto) -> dict[str, int | str]:
    """The dim names of ``model`` that its graph pins to one size, or to another dim name
    (see the module docstring)."""
    dims = _dims(model)
    producers = {output: node for node in model.graph.node for output in node.output}
    found: dict[str, set[int]] = {}
    for node in model.graph.node:
        for left, right in _meetings(node, dims):
            for name, size in ((left, right), (right, left)):
                if isinstance(name, str) and isinstance(size, int):
                    found.setdefault(name, set()).add(size)
            parts = _concatenated(node, dims, producers) if not isinstance(left, int) else None
            names = [part for part in parts or () if not isinstance(part, int)]
            if parts and isinstance(right, int) and len(names) == 1 and isinstance(names[0], str):
                rest = right - sum(part for part in parts if isinstance(part, int))
                if rest > 0:  # one named part of a concatenation: the contracted size less the others
                    found.setdefault(names[0], set()).add(rest)
    sizes = {name: next(iter(options)) for name, options in found.items() if len(options) == 1}
    joined, group_sizes = _joined(model, dims)
    forced: dict[str, int | str] = {}
    for name, root in joined.items():  # a group takes the one size any member is pinned to
        known = {size for member, size in sizes.items() if joined.get(member, member) == root}
        known |= group_sizes.get(root, set())
        forced[name] = next(iter(known)) if len(known) == 1 else root
    for name, size in sizes.items():
        forced.setdefault(name, size)
    return {name: value for name, value in forced.items() if value != name}


def _joined(model: onnx.ModelProto, dims: dict[str, list[Dim]]) -> tuple[dict[str, str], dict[str, set[int]]]:
    """Dim names a ``Concat`` requires equal (its inputs agree on every other axis; no
    broadcasting), each mapped to the first name of its group (``Concat`` of a state of batch
    ``b`` and a one-hot of batch ``b2``: ``b2`` -> ``b``), and the sizes a group meets there."""
    parent: dict[str, str] = {}
    met: dict[str, set[int]] = {}

    def root(name: str) -> str:
        while parent.get(name, name) != name:
            name = parent[name]
        return name

    for node in model.graph.node:
        shapes = [dims.get(name) for name in node.input]
        if node.op_type != "Concat" or not shapes or any(not s or len(s) != len(shapes[0]) for s in shapes):
            continue
        along = _attribute(node, "axis", 0) % len(shapes[0])
        for axis in (axis for axis in range(len(shapes[0])) if axis != along):
            names = sorted({shape[axis] for shape in shapes if isinstance(shape[axis], str)})
            for other in names[1:]:
                first, second = root(names[0]), root(other)
                if first != second:
                    parent[max(first, second)] = min(first, second)
            for name in names:
                parent.setdefault(name, name)
                met.setdefault(name, set()).update(shape[axis] for shape in shapes if isinstance(shape[axis], int))
    groups: dict[str, set[int]] = {}
    for name, found in met.items():
        groups.setdefault(root(name), set()).update(found)
    return {name: root(name) for name in parent}, groups


def pinned(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """A copy of ``model`` with every pinned dim name made static where the graph states
    a shape, repeated while pinning reveals more; None where nothing is pinned."""
    result, pinned_any = model, False
    for _ in range(4):  # each round can reveal a meeting the last one hid; a chain this long is rare
        forced = forced_dims(result)
        if not forced:
            break
        result = _substituted(result, forced)
        pinned_any = True
    return result if pinned_any else None


def _substituted(model: onnx.ModelProto, forced: dict[str, int | str]) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    graph = copy.graph
    for value in (*graph.input, *graph.value_info, *graph.output):
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_param") and dim.dim_param in forced:
                replacement = forced[dim.dim_param]
                dim.Clear()
                if isinstance(replacement, int):
                    dim.dim_value = replacement
                else:
                    dim.dim_param = replacement
    return copy


__all__ = ["forced_dims", "pinned"]
