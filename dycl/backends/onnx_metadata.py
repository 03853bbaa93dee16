"""Name an exported ONNX sub-DNN after its HCFG node, so that a file opened in
Netron (or ``onnx.load``) says where it came from.

Assumes ``data`` is a serialized ONNX model with every weight inside it.
Guarantees the same computation (graph nodes, inputs, outputs, initializers are
untouched); only the graph name, the model and graph ``doc_string`` and the
model's ``metadata_props`` (keys ``dycl.*``) change.
"""

from __future__ import annotations

import onnx


def describe_onnx(data: bytes, graph_name: str, doc: str, metadata: dict[str, str]) -> bytes:
    """``data`` with ``graph_name``, ``doc`` and ``metadata`` recorded in the model."""
    model = onnx.load_model_from_string(data)
    model.graph.name = graph_name
    model.graph.doc_string = doc
    model.doc_string = doc
    kept = [prop for prop in model.metadata_props if prop.key not in metadata]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    for key, value in sorted(metadata.items()):
        model.metadata_props.add(key=key, value=value)
    return model.SerializeToString()


__all__ = ["describe_onnx"]
