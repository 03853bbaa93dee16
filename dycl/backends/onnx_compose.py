"""Composing exported ONNX graphs into one model (the single-graph lowering, issue 29).

A ``GraphBuilder`` is one graph scope: the whole model's main graph, or an ``If`` branch nested
in it. It inlines whole ONNX models (``inline``): their nodes renamed into the scope, their
initializers hoisted to the root scope once per file (identical sub-DNNs share one file, and so
one copy of their weights), their opsets merged. It adds the few nodes the lowering needs
(constants, casts, comparisons, ``If``), each output a fresh name from the one supply all the
scopes of a model share.

Assumes: the inlined models use only the default ONNX domain at one opset version and no
model-local functions (``ComposeError`` otherwise: the lowering falls back to the host).
Guarantees: every name a scope defines is unique in the whole model, and a branch refers to
the values of the scopes around it by their own names, as ONNX's outer-scope rule allows."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class ComposeError(Exception):
    """A graph the composition cannot take (the lowering keeps the host)."""


@dataclass
class _Shared:
    """What every scope of one model shares: the name supply, the hoisted weights, the opset."""

    used: set[str] = field(default_factory=set)
    initializers: list[onnx.TensorProto] = field(default_factory=list)
    hoisted: dict[tuple[str, str], str] = field(default_factory=dict)  # (file, name) -> hoisted name
    opset: int | None = None
    ir_version: int = 8
    constants: dict[tuple[int, bytes, tuple[int, ...]], str] = field(default_factory=dict)

    def fresh(self, stem: str) -> str:
        base = "".join(c if c.isalnum() or c in "_./" else "_" for c in stem) or "v"
        name, number = base, 0
        while name in self.used:
            number += 1
            name = f"{base}_{number}"
        self.used.add(name)
        return name


@dataclass
class GraphBuilder:
    """One graph scope under construction: its nodes, in order."""

    shared: _Shared = field(default_factory=_Shared)
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    root: bool = True

    def branch(self) -> GraphBuilder:
        """A new scope nested in this one (an ``If`` branch)."""
        return GraphBuilder(self.shared, [], root=False)

    def fresh(self, stem: str) -> str:
        return self.shared.fresh(stem)

    def reserve(self, name: str) -> str:
        """``name`` itself (a graph input), which no later value may take."""
        if name in self.shared.used:
            raise ComposeError(f"the name {name!r} is taken twice")
        self.shared.used.add(name)
        return name

    def op(self, op_type: str, inputs: list[str], stem: str = "", **attributes: object) -> str:
        """The one output of a new ``op_type`` node."""
        out = self.fresh(stem or op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attributes))
        return out

    def constant(self, value: np.ndarray) -> str:
        """A root-scope initializer holding ``value`` (one per distinct value)."""
        array = np.asarray(value)
        key = (int(helper.np_dtype_to_tensor_dtype(array.dtype)), array.tobytes(), array.shape)
        found = self.shared.constants.get(key)
        if found is None:
            found = self.shared.constants[key] = self.fresh("const")
            self.shared.initializers.append(numpy_helper.from_array(array, found))
        return found

    def if_(self, condition: str, then: GraphBuilder, orelse: GraphBuilder,
            then_outputs: list[str], else_outputs: list[str], types: list[int], stem: str = "if") -> list[str]:
        """The outputs of ``If(condition)`` whose branches yield ``then_outputs`` / ``else_outputs``
        (values of their scopes or of scopes around them; each passes an ``Identity``, so that
        a branch never yields an outer value itself)."""
        graphs = [self._branch_graph(scope, outputs, types, f"{stem}_{side}")
                  for scope, outputs, side in ((then, then_outputs, "then"), (orelse, else_outputs, "else"))]
        outs = [self.fresh(f"{stem}_out") for _ in types]
        self.nodes.append(helper.make_node("If", [condition], outs, then_branch=graphs[0], else_branch=graphs[1]))
        return outs

    def _branch_graph(self, scope: GraphBuilder, outputs: list[str], types: list[int], name: str) -> onnx.GraphProto:
        yielded = [scope.op("Identity", [value], "yield") for value in outputs]
        infos = [helper.make_tensor_value_info(value, elem, None) for value, elem in zip(yielded, types)]
        return helper.make_graph(scope.nodes, name, [], infos)

    def inline(self, model: onnx.ModelProto, file: str, feeds: dict[str, str]) -> dict[str, str]:
        """Inline ``model`` (from ``file``) into this scope, its graph inputs fed by ``feeds``
        (input name -> value); its graph outputs' values by output name."""
        self._merge_opset(model)
        graph = model.graph
        names: dict[str, str] = {"": ""}
        for initializer in graph.initializer:
            names[initializer.name] = self._hoist(file, initializer)
        for value in graph.input:
            if value.name in names:
                continue
            if value.name not in feeds:
                raise ComposeError(f"{file}: nothing feeds its input {value.name!r}")
            names[value.name] = feeds[value.name]
        for node in graph.node:
            if node.op_type == "Identity" and node.domain in ("", "ai.onnx") and node.output[0]:
                names[node.output[0]] = self._read(node.input[0], names)  # one value, two names: no copy
                continue
            self.nodes.append(self._renamed(node, names))
        missing = [out.name for out in graph.output if out.name not in names]
        if missing:
            raise ComposeError(f"{file}: outputs {missing} are not computed by its nodes")
        return {out.name: names[out.name] for out in graph.output}

    def _hoist(self, file: str, initializer: onnx.TensorProto) -> str:
        key = (file, initializer.name)
        if key not in self.shared.hoisted:
            copy = onnx.TensorProto()
            copy.CopyFrom(initializer)
            copy.name = self.shared.hoisted[key] = self.fresh(f"{file}/{initializer.name}")
            self.shared.initializers.append(copy)
        return self.shared.hoisted[key]

    def _renamed(self, node: onnx.NodeProto, names: dict[str, str]) -> onnx.NodeProto:
        """``node`` with its inputs renamed by ``names`` and fresh outputs (added to ``names``);
        a subgraph attribute is renamed with the same table (its outer-scope references)."""
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        if copy.domain not in ("", "ai.onnx"):
            raise ComposeError(f"a node of domain {copy.domain!r} ({copy.op_type})")
        copy.ClearField("input")
        copy.input.extend(self._read(name, names) for name in node.input)
        for attribute in copy.attribute:
            for graph in ([attribute.g] if attribute.type == onnx.AttributeProto.GRAPH else list(attribute.graphs)):
                self._rename_graph(graph, dict(names))
        copy.ClearField("output")
        for name in node.output:
            names[name] = self.fresh(name) if name else ""
            copy.output.append(names[name])
        copy.name = self.fresh(node.name or node.op_type) if node.name else ""
        return copy

    def _rename_graph(self, graph: onnx.GraphProto, names: dict[str, str]) -> None:
        for value in (*graph.input, *graph.initializer):
            names[value.name] = value.name = self.fresh(value.name)
        nodes = [self._renamed(node, names) for node in graph.node]
        del graph.node[:]
        graph.node.extend(nodes)
        for out in graph.output:
            out.name = self._read(out.name, names)
        del graph.value_info[:]

    @staticmethod
    def _read(name: str, names: dict[str, str]) -> str:
        if name not in names:
            raise ComposeError(f"the value {name!r} is read before it is defined")
        return names[name]

    def _merge_opset(self, model: onnx.ModelProto) -> None:
        if model.functions:
            raise ComposeError("a model with local functions")
        for opset in model.opset_import:
            if opset.domain not in ("", "ai.onnx"):
                raise ComposeError(f"the opset domain {opset.domain!r}")
            if self.shared.opset not in (None, opset.version):
                raise ComposeError(f"opset {opset.version} beside opset {self.shared.opset}")
            self.shared.opset = opset.version
        self.shared.ir_version = max(self.shared.ir_version, model.ir_version)

    def model(self, inputs: list[onnx.ValueInfoProto], outputs: list[str], names: list[str], types: list[int],
              name: str) -> onnx.ModelProto:
        """The root scope as a model whose outputs, named ``names``, are ``outputs`` (each through an
        ``Identity``)."""
        assert self.root, "only the root scope is a model"
        yielded = [self.reserve(out) for out in names]
        self.nodes += [helper.make_node("Identity", [value], [out]) for value, out in zip(outputs, yielded)]
        infos = [helper.make_tensor_value_info(value, elem, None) for value, elem in zip(yielded, types)]
        graph = helper.make_graph(self.nodes, name, inputs, infos, initializer=self.shared.initializers)
        localize_initializers(graph)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.shared.opset or 17)],
                                  producer_name="dycl-single-graph")
        model.ir_version = self.shared.ir_version
        return model


def localize_initializers(graph: onnx.GraphProto) -> None:
    """Move each of ``graph``'s initializers that exactly one ``If`` branch reads (and no other graph)
    into that branch, and drop those no graph reads, by a node or as an output (the weights of a
    join tried and dropped: ``dycl.backends.single_graph``). Note: ONNX Runtime treats an outer-scope
    weight as a value, not a constant, so a branch reading its weights from the main graph loses
    constant folding, weight prepacking and the NCHWc layout of its convolutions (sdn_mobilenet's
    whole graph ran 1.8x slower)."""
    graphs = nested_graphs(graph)
    readers: dict[str, set[int]] = {}
    for position, one in enumerate(graphs):
        for name in [*(i for node in one.node for i in node.input), *(out.name for out in one.output)]:
            readers.setdefault(name, set()).add(position)
    kept = []
    for initializer in graph.initializer:
        found = readers.get(initializer.name, set())
        if len(found) == 1 and 0 not in found:
            graphs[next(iter(found))].initializer.append(initializer)
        elif found:
            kept.append(initializer)
    del graph.initializer[:]
    graph.initializer.extend(kept)


def nested_graphs(graph: onnx.GraphProto) -> list[onnx.GraphProto]:
    """``graph`` and every graph nested in its nodes' attributes, ``graph`` first."""
    found = [graph]
    for node in graph.node:
        for attribute in node.attribute:
            for inner in ([attribute.g] if attribute.type == onnx.AttributeProto.GRAPH else list(attribute.graphs)):
                found += nested_graphs(inner)
    return found


#: ONNX element types by numpy dtype name
ELEM = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "float16": TensorProto.FLOAT16,
        "bfloat16": TensorProto.BFLOAT16, "int64": TensorProto.INT64, "int32": TensorProto.INT32,
        "int16": TensorProto.INT16, "int8": TensorProto.INT8, "uint8": TensorProto.UINT8, "bool": TensorProto.BOOL}
FLOATS = frozenset({TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16})

__all__ = ["ELEM", "FLOATS", "ComposeError", "GraphBuilder", "localize_initializers", "nested_graphs"]
