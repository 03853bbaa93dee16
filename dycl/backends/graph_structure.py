"""The structure of an ONNX graph, without its names or its weights' values: two graphs with one
structure run the same kernels on the same shapes, so they cost the same.

``structure_key`` serialises, in the graph's (topological) order, every node's operator, domain
and attributes, with each value name replaced by its first-seen position; the graph inputs' and
initializers' element types and dims; and the given input shapes. Initializer contents and
value names (``model.blocks.3.conv.weight`` against ``model.blocks.4.conv.weight``) are left
out; a ``Constant`` node's tensor, being an attribute, is kept.

Assumes: a graph's cost follows its operators, attributes and shapes, not its weights' values
(dense kernels; what ``dycl.backends.thread_choice`` times). Guarantees: graphs that differ in
any operator, attribute, wiring, type or shape get different keys.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import onnx


def structure_key(model: onnx.ModelProto, shapes: Mapping[str, tuple[int, ...]]) -> str:
    """A digest of ``model``'s structure at the input ``shapes`` (module note)."""
    graph = model.graph
    numbers: dict[str, int] = {}

    def number(name: str) -> int:
        return numbers.setdefault(name, len(numbers))

    digest = hashlib.sha256(repr(sorted((o.domain, o.version) for o in model.opset_import)).encode())
    for value in graph.input:
        tensor = value.type.tensor_type
        digest.update(repr(("input", number(value.name), tensor.elem_type, shapes.get(value.name))).encode())
    for tensor in graph.initializer:
        digest.update(repr(("initializer", number(tensor.name), tensor.data_type, tuple(tensor.dims))).encode())
    for node in graph.node:
        wiring = ([number(name) if name else -1 for name in node.input],
                  [number(name) if name else -1 for name in node.output])
        attributes = [attribute.SerializeToString(deterministic=True) for attribute in node.attribute]
        digest.update(repr((node.op_type, node.domain, wiring, attributes)).encode())
    digest.update(repr([number(value.name) for value in graph.output]).encode())
    return digest.hexdigest()


__all__ = ["structure_key"]
