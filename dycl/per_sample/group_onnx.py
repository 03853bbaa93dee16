"""Per-sample semantics for one exported sub-DNN: the ONNX graph of one sample,
run over a group of samples, batched where proven and by an ONNX ``Scan`` elsewhere.

Assumes: ``data`` is a sub-DNN exported for one sample (every input and output
is that sample's value, whatever the statements do with its batch-of-one dim).
Guarantees: the wrapped model takes each input with one more leading dim, the
*group* (``G`` samples, symbolic), and returns each output with the group dim
in front; row ``g`` of every output is exactly what the single-sample graph
returns for row ``g`` of the inputs (bit for bit in the scanned form; in exact
arithmetic in the batched form, see below). Input and output names, dtypes and order
are unchanged, so the host calls it as it calls the single-sample file.

Three forms, chosen per sub-DNN by ``group_model``:

- *batched* (``group_model``): ``dycl.per_sample.row_independence`` proves, node by
  node, that the graph keeps rows apart when its batch-of-one dim is widened to
  the group; the proven nodes run once on all ``G`` rows (arithmetic batched
  across samples; a condition's ``conf.max()`` and ``x.view(-1)`` included, as
  *sample* values with the group dim in front), and the unproven *tail* (a
  ``cumsum`` of a flattened sample, an ``x.size(0)`` read into a value, and
  everything that reads their values) runs per sample in a ``Scan`` that reads
  the proven values row by row. Outputs whose nodes are proven come out of the
  widened graph directly.
- *scanned* (``scan_over_samples``): the whole graph in a ``Scan``, where no
  node reading a sample's input can be proven (or the graph's shape is one the
  batched form does not handle: an output that is an input, no opset 13).
- *one row* (a sub-DNN without inputs, whose values are the same for every
  sample): its outputs with a leading dim of 1; the router hands every sample
  of the group that row (``hostgen/emit_batched.py``).

Why not ``torch.vmap``: the TorchScript exporter dycl uses
(``dycl.backends.onnx_export``) does not trace through it (measured with torch
2.13: ``x.size(0)`` under vmap fails with "Unsupported value kind: Tensor";
without it, vmap's batching rules leave ``aten::_softmax``, which the exporter
has no symbolic for). Running the sub-DNN with its own batch dim as the group
without a proof is wrong in general: a statement written for one sample may
reduce over the whole tensor, so samples would mix. ``Scan`` keeps each
sample's computation exactly as exported (sound for every sub-DNN) but runs
the body once per sample, so its arithmetic is not batched.
Measured (the two forms side by side in one process, batches of 32, median of 5,
on the shared 2-core machine at load 4-6): the batched form took 0.79x the
scanned form's time on sdn_vgg19, 0.74x on skipnet_ff, 0.76x on caption_resnext
and 1.00x on sdn_resnet56 (ONNX Runtime's CPU Conv runs image by image at any
batch size; what batching saves is per-node and per-iteration overhead).
The batched form's rows equal the scanned form's in exact arithmetic; ONNX
Runtime's kernels may round differently at another batch size (float outputs
then differ in the last bits, as they do between eager and ONNX Runtime).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from dycl.export.static_fold import fold_static_shapes
from dycl.per_sample.row_independence import ROWED, SAMPLE, SHARED, Edit, RowPlan, analyse

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
    _rename(body.node, {**outputs, **inputs})
    for name, inner in outputs.items():
        if name in inputs:  # an output that is an input unchanged: no node of the body produces it
            body.node.append(helper.make_node("Identity", [inputs[name]], [inner]))
    scan = helper.make_node(
        "Scan", [v.name for v in single.graph.input], [v.name for v in single.graph.output],
        name="per_sample_scan", body=body, num_scan_inputs=len(single.graph.input))
    graph = helper.make_graph([scan], single.graph.name, outer_inputs, outer_outputs)
    return _model(single, graph)


def _rename(nodes, names: dict[str, str]) -> None:
    """Rename the values ``names`` maps wherever ``nodes`` (and their subgraphs, which may
    read outer-scope values by name) read or write them."""
    for node in nodes:
        node.input[:] = [names.get(name, name) for name in node.input]
        node.output[:] = [names.get(name, name) for name in node.output]
        for attribute in node.attribute:
            for graph in ([attribute.g] if attribute.type == onnx.AttributeProto.GRAPH else attribute.graphs):
                _rename(graph.node, names)


def _opsets(single: onnx.ModelProto) -> list:
    return [helper.make_opsetid(o.domain, max(o.version, _MIN_OPSET) if o.domain in ("", "ai.onnx") else o.version)
            for o in single.opset_import]


def _model(single: onnx.ModelProto, graph: onnx.GraphProto) -> bytes:
    model = helper.make_model(graph, opset_imports=_opsets(single), producer_name="dycl",
                              ir_version=single.ir_version)
    model.metadata_props.extend(single.metadata_props)
    return model.SerializeToString()


def group_model(data: bytes) -> bytes:
    """The per-sample group model of the single-sample sub-DNN ``data``: batched where
    proven, else scanned (module docstring)."""
    single = fold_static_shapes(onnx.load_model_from_string(data))
    if not single.graph.input:  # nothing per sample: one row, the same for every sample (the router knows)
        return _one_row(single)
    plan = analyse(single)
    names = {value.name for value in single.graph.input}
    proven_rows = any(name not in names for name in plan.per_sample)
    if not proven_rows or any(value.name in names for value in single.graph.output):
        return scan_over_samples(data)
    built = _Batched(single, plan).build()
    return scan_over_samples(data) if built is None else _model(single, built)


def _one_row(single: onnx.ModelProto) -> bytes:
    """A sub-DNN without inputs, its outputs given a leading dim of 1 (a group of one row)."""
    graph = onnx.GraphProto()
    graph.CopyFrom(single.graph)
    axis = numpy_helper.from_array(np.array([0], dtype=np.int64), "rows__axis_0")
    graph.initializer.append(axis)
    for value in graph.output:
        inner = f"one_row__{value.name}"
        _rename(graph.node, {value.name: inner})
        graph.node.append(helper.make_node("Unsqueeze", [inner, axis.name], [value.name]))
    outputs = [_with_group(value, value.name) for value in graph.output]
    del graph.output[:]
    graph.output.extend(outputs)
    del graph.value_info[:]
    return _model(single, graph)


class _Batched:
    """Builds the batched form: proven nodes widened, the tail in a ``Scan`` (module docstring)."""

    def __init__(self, single: onnx.ModelProto, plan: RowPlan) -> None:
        self.single, self.plan = single, plan
        self.nodes: list[onnx.NodeProto] = []
        self.initializers = list(single.graph.initializer)
        inputs = {value.name for value in single.graph.input}
        outputs = {value.name for value in single.graph.output}
        batched = [single.graph.node[i] for i in plan.batched]
        made = {name for node in batched for name in node.output}
        # the widened graph's names: rowed inputs are squeezed copies, outputs come from an unsqueeze or the Scan
        self.outer = {name: f"rows__{name}" for name in (made & outputs) | (inputs & plan.rowed)}
        self.made = made

    def _constant(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def _type(self, name: str) -> onnx.TypeProto | None:
        if name in self.plan.types:
            return self.plan.types[name]
        tensor = next((t for t in self.single.graph.initializer if t.name == name), None)
        return None if tensor is None else helper.make_tensor_type_proto(tensor.data_type, list(tensor.dims))

    def build(self) -> onnx.GraphProto | None:
        single, plan = self.single, self.plan
        axis = self._constant("rows__axis_1", np.array([1], dtype=np.int64))
        for value in single.graph.input:
            if value.name in self.outer:  # (G, 1, ...) -> (G, ...)
                self.nodes.append(helper.make_node("Squeeze", [value.name, axis], [self.outer[value.name]]))
        for index in plan.batched:
            node = onnx.NodeProto()
            node.CopyFrom(single.graph.node[index])
            if index in plan.reshapes:
                node.input[1] = self._constant(f"rows__shape_{index}", plan.reshapes[index])
            _rename([node], self.outer)
            if index in plan.expands:
                self._repeat_over_group(node, index, plan.expands[index])
            if index in plan.edits:
                node = self._edited(node, index, plan.edits[index])
            self.nodes.append(node)
        scanned = [value.name for value in single.graph.output
                   if not (value.name in self.made and plan.classes.get(value.name) in (ROWED, SAMPLE))]
        if scanned and not self._scan(scanned, axis):
            return None
        for value in single.graph.output:
            if value.name in scanned:
                continue
            if plan.classes[value.name] == ROWED:  # (G, ...) -> (G, 1, ...)
                self.nodes.append(helper.make_node("Unsqueeze", [self.outer[value.name], axis], [value.name]))
            else:  # a sample value has the group dim in front already
                self.nodes.append(helper.make_node("Identity", [self.outer[value.name]], [value.name]))
        used = _reads(self.nodes)  # a replaced Reshape target is no longer read (ORT warns of it)
        self.nodes = [n for n in self.nodes if n.op_type != "Constant" or n.output[0] in used]
        return helper.make_graph(
            self.nodes, single.graph.name, [_with_group(v, v.name) for v in single.graph.input],
            [_with_group(v, v.name) for v in single.graph.output], [t for t in self.initializers if t.name in used])

    def _edited(self, node: onnx.NodeProto, index: int, edit: Edit) -> onnx.NodeProto:
        """``node`` as the widened graph runs it (``RowPlan.edits``)."""
        for position, count in edit.lifts.items():  # a sample value (G, dims) -> (G, 1, ..., 1, dims)
            axes = self._constant(f"rows__lift_axes_{index}_{position}", np.arange(1, count + 1, dtype=np.int64))
            lifted = f"rows__lifted_{index}_{position}"
            self.nodes.append(helper.make_node("Unsqueeze", [node.input[position], axes], [lifted]))
            node.input[position] = lifted
        if edit.identity:
            return helper.make_node("Identity", [node.input[0]], [node.output[0]], name=node.name)
        if edit.axis is not None:
            _set_attribute(node, "axis", edit.axis)
        if edit.target is not None:
            node.input[1] = self._constant(f"rows__shape_{index}", np.array(edit.target, dtype=np.int64))
        if edit.axes is not None and edit.axes_as_input:
            axes = self._constant(f"rows__axes_{index}", np.array(edit.axes, dtype=np.int64))
            if len(node.input) > 1:
                node.input[1] = axes
            else:
                node.input.append(axes)
        elif edit.axes is not None:
            _set_attribute(node, "axes", edit.axes)
        return node

    def _repeat_over_group(self, node: onnx.NodeProto, index: int, positions: list[int]) -> None:
        """Expand ``node``'s shared inputs at ``positions`` (dim 0 of 1) to the group's rows."""
        rowed = next(name for position, name in enumerate(node.input) if position not in positions)
        rank = len(self.plan.types[self.single.graph.node[index].output[0]].tensor_type.shape.dim)
        group = f"rows__group_{index}"
        self.nodes.append(helper.make_node("Shape", [rowed], [group], start=0, end=1))  # [G]
        ones = self._constant(f"rows__ones_{index}", np.ones(rank - 1, dtype=np.int64))
        target = f"rows__repeat_{index}"
        self.nodes.append(helper.make_node("Concat", [group, ones], [target], axis=0))
        for position in positions:
            repeated = f"rows__repeated_{index}_{position}"
            self.nodes.append(helper.make_node("Expand", [node.input[position], target], [repeated]))
            node.input[position] = repeated

    def _scan(self, scanned: list[str], axis: str) -> bool:
        """Append the tail's ``Scan``; False where it cannot be built (a type not inferred, no input)."""
        single, plan = self.single, self.plan
        tail = []
        for index in plan.tail:
            node = onnx.NodeProto()
            node.CopyFrom(single.graph.node[index])
            tail.append(node)
        made = {name for node in tail for name in node.output}
        inputs = {value.name for value in single.graph.input}
        read = _reads(tail) - made
        per_sample = sorted(name for name in read if name in inputs or plan.classes.get(name) in (ROWED, SAMPLE))
        body_in = {name: f"sample_in__{name}" for name in per_sample}
        body_out = {name: f"sample_out__{name}" for name in scanned}
        shared = {name: self.outer.get(name, name) for name in read if plan.classes.get(name) == SHARED}
        _rename(tail, {**shared, **body_in, **{n: o for n, o in body_out.items() if n in made}})
        for name in scanned:
            if name not in made:  # a shared value: the same row for every sample
                tail.append(helper.make_node("Identity", [self.outer.get(name, name)], [body_out[name]]))
        types = {name: self._type(name) for name in [*per_sample, *scanned]}
        if not per_sample or any(t is None for t in types.values()):
            return False
        sources = []
        for name in per_sample:
            if name in inputs:  # the group input as given, (G, 1, ...)
                sources.append(name)
            elif plan.classes[name] == SAMPLE:  # (G, dims): the Scan hands each sample its dims
                sources.append(self.outer.get(name, name))
            else:  # a proven value, (G, ...) -> (G, 1, ...)
                sources.append(f"rows__{name}__per_sample")
                self.nodes.append(helper.make_node("Unsqueeze", [self.outer.get(name, name), axis], [sources[-1]]))
        body = helper.make_graph(
            tail, f"{single.graph.name or 'sub_dnn'}_tail_one_sample",
            [helper.make_value_info(body_in[n], types[n]) for n in per_sample],
            [helper.make_value_info(body_out[n], types[n]) for n in scanned])
        self.nodes.append(helper.make_node("Scan", sources, scanned, name="per_sample_tail", body=body,
                                           num_scan_inputs=len(sources)))
        return True


def _set_attribute(node: onnx.NodeProto, name: str, value) -> None:
    kept = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend([*kept, helper.make_attribute(name, value)])


def _reads(nodes) -> set[str]:
    """Every value ``nodes`` read, their subgraphs' outer-scope reads included."""
    names: set[str] = set()
    for node in nodes:
        names.update(name for name in node.input if name)
        for attribute in node.attribute:
            for graph in ([attribute.g] if attribute.type == onnx.AttributeProto.GRAPH else attribute.graphs):
                names |= _reads(graph.node) - {name for inner in graph.node for name in inner.output}
    return names


__all__ = ["GROUP", "group_model", "scan_over_samples"]
