"""The example's size of each named symbolic dim of an exported ONNX sub-DNN's inputs
(``{"batch": 1}``): what the host specializes a session to when it loads the graph.

Why: a graph with a symbolic batch dim, run on ONNX Runtime with that dim fixed by a
free-dimension override, optimizes to the same graph as the static export (ranet, sdn_mobilenet,
skipnet_rnn, 2026-11-28: equal operator counts in ``optimized_model_filepath``; ranet's symbolic
session keeps 12 Reshape and 4 Add more). The host (``ort_runtime._SpecializingExecutable``) made
such a session only the second time it saw a size, inside a user's call; with these sizes it makes
the one for the example's size at load, so a symbolic model serves the example's size as fast as
a static one from its first call.

Assumes ``data`` is the serialized graph exported for ``variant`` (its graph inputs are named after
``variant``'s ports) and ``variant.examples[0]`` its example. Guarantees: only dims written as an
identifier (what ONNX Runtime can override by name) appear; an empty result where a name has two
sizes in the example, a size is not a number or a dim has no name to fix it by (an expression), so
the host then specializes as before (by what it sees). The sizes only choose which session is made
first: the host still runs a feed on a specialized session only where its shapes are exactly that
session's.
"""

from __future__ import annotations

import re

import onnx
import torch

from dycl.hcfg.ports import Variant

_NAME = re.compile(r"[A-Za-z_]\w*")


def example_sizes(data: bytes, variant: Variant) -> dict[str, int]:
    """``{dim name: size in the example}`` for the named dims of the graph's inputs."""
    graph = onnx.load_model_from_string(data).graph
    example = dict(zip((port.name for port in variant.inputs), variant.examples[0]))
    sizes: dict[str, int] = {}
    for value in graph.input:
        dims = value.type.tensor_type.shape.dim
        if any(not dim.HasField("dim_value") and not _NAME.fullmatch(dim.dim_param) for dim in dims):
            return {}  # a dim no name fixes (an expression, an unknown): the session would stay symbolic
        named = [(axis, dim.dim_param) for axis, dim in enumerate(dims) if not dim.HasField("dim_value")]
        tensor = example.get(value.name)
        if not named:
            continue
        if not isinstance(tensor, torch.Tensor) or tensor.dim() != len(dims):
            return {}
        for axis, name in named:
            try:
                size = int(tensor.shape[axis])
            except (TypeError, ValueError):  # a size without a value (a symbol of shape propagation)
                return {}
            if sizes.setdefault(name, size) != size:
                return {}
    return sizes


__all__ = ["example_sizes"]
