"""Per-sample semantics for one exported sub-DNN: the ONNX graph of one sample,
run over a group of samples by an ONNX ``Scan``.

Assumes: ``data`` is a sub-DNN exported for one sample (every input and output
is that sample's value, whatever the statements do with its batch-of-one dim).
Guarantees: the wrapped model takes each input with one more leading dim, the
*group* (``G`` samples, symbolic), and returns each output with the group dim
in front; row ``g`` of every output is exactly what the single-sample graph
returns for row ``g`` of the inputs. Input and output names, dtypes and order
are unchanged, so the host calls it as it calls the single-sample file.

Why a ``Scan`` and not ``torch.vmap``: the TorchScript exporter dycl uses
(``dycl.backends.onnx_export``) does not trace through ``torch.vmap`` (measured
with torch 2.13: ``x.size(0)`` under vmap fails with "Unsupported value kind:
Tensor"; without it, vmap's batching rules leave ``aten::_softmax``, which the
exporter has no symbolic for). Running the sub-DNN with its own batch dim as
the group is wrong in general: a statement written for one sample may reduce
over the whole tensor (``conf.max() > t``, ``x.view(-1)``, ``x.size(0)``), so
samples would mix. ``Scan`` keeps each sample's computation exactly as
exported (sound for every sub-DNN, no analysis needed) and runs the group in
one runtime call, so the host's Python work per sub-DNN call does not grow
with the group. The price: the body runs once per sample, so the arithmetic
is not batched across the group. Measured on the shared 2-core machine (noisy,
``benchmarks/batch.py --models sdn_vgg19 --sizes 32 --batches 3``): the static
whole network at batch 32 ran about 5x the samples/s of the per-sample model.
Next step: a proof per sub-DNN, on its ONNX graph, that every node keeps rows
apart (elementwise, Conv, Gemm on the rows, reductions rewritten to skip the
group axis); such a sub-DNN can run as one batched graph instead of a Scan.
"""

from __future__ import annotations

import onnx
from onnx import helper

GROUP = "samples"
#: ``Scan`` with a body that may read outer-scope values exists from opset 9; 16 added bfloat16
_MIN_OPSET = 16


def _with_group(value: onnx.ValueInfoProto, name: str) -> onnx.ValueInfoProto:
    """``value`` with a symbolic group dim in front."""
    typed = onnx.ValueInfoProto()
    typed.CopyFrom(value)
    typed.name = name
    shape = typed.type.tensor_type.shape
    dims = [onnx.TensorShapeProto.Dimension(dim_param=GROUP)] + list(shape.dim)
    del shape.dim[:]
    shape.dim.extend(dims)
    return typed


def scan_over_samples(data: bytes) -> bytes:
    """The per-sample group model of the single-sample sub-DNN ``data`` (module docstring)."""
    single = onnx.load_model_from_string(data)
    body = onnx.GraphProto()
    body.CopyFrom(single.graph)
    body.name = f"{single.graph.name or 'sub_dnn'}_one_sample"
    outer_inputs = [_with_group(value, value.name) for value in single.graph.input]
    outer_outputs = [_with_group(value, value.name) for value in single.graph.output]
    # the body's ports are renamed so that they cannot clash with the outer graph's
    inputs = {value.name: f"sample_in__{value.name}" for value in body.input}
    outputs = {value.name: f"sample_out__{value.name}" for value in body.output}
    for value in body.input:
        value.name = inputs[value.name]
    for value in body.output:
        value.name = outputs[value.name]
    for node in body.node:
        node.input[:] = [inputs.get(name, outputs.get(name, name)) for name in node.input]
        node.output[:] = [outputs.get(name, name) for name in node.output]
    for name, inner in outputs.items():
        if name in inputs:  # an output that is an input unchanged: no node of the body produces it
            body.node.append(helper.make_node("Identity", [inputs[name]], [inner]))
    scan = helper.make_node(
        "Scan", [v.name for v in single.graph.input], [v.name for v in single.graph.output],
        name="per_sample_scan", body=body, num_scan_inputs=len(single.graph.input))
    graph = helper.make_graph([scan], single.graph.name, outer_inputs, outer_outputs)
    opsets = [helper.make_opsetid(o.domain, max(o.version, _MIN_OPSET) if o.domain in ("", "ai.onnx") else o.version)
              for o in single.opset_import]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="dycl", ir_version=single.ir_version)
    model.metadata_props.extend(single.metadata_props)
    return model.SerializeToString()


__all__ = ["GROUP", "scan_over_samples"]
