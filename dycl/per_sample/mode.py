"""``per_sample=True`` as an execution mode: the hooks of ``dycl.execution_mode.WholeCall``,
overridden so that every stage of the compiler does its part of per-sample execution.

- *rewrite*: refuse what has no per-sample meaning (module state written in ``forward``,
  inputs updated in place, framework output objects) and an example that is not one sample;
- *optimize*: where every dim is static, conditions whose branches are side-effect-free
  sub-DNNs ending in ``return`` are if-converted (``dycl.per_sample.predicate``): both branches
  run on the whole group and each sample's row is selected by its own test;
- *explore*: the batch dim is not symbolic: each sub-DNN is compiled for one sample;
- *compile*: each exported ONNX graph becomes its group model (``group_onnx.group_model``)
  in the one post-export step every ONNX backend applies (``dycl.backends.base.OnnxStep``),
  after an if-converted graph is checked to run on any sample's data (``predicable_onnx``),
  refused where the backend cannot run a ``Scan`` the group model needs; shape guards are
  refused (they would read a group's axes); each graph's thread choice is made on a group of
  32 samples (``serving_feeds``), and whether its pool spins within runs is timed on the chain
  of all graphs (``dycl.backends.spin_choice``);
- *emit*: the router host (``hostgen.emit_batched``), and the manifest's inputs with the
  batch of samples as their leading dim.

Assumes the compiler calls each hook once, at its stage (``dycl.compiler``). Guarantees:
a model this mode compiles gives each sample of a batch what eager gives it alone
(``dycl.per_sample.semantics``); anything else is refused before it is compiled, by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import onnx

from dycl.backends.spin_choice import group_feeds
from dycl.execution_mode import WholeCall
from dycl.export.static_fold import fold_static_shapes
from dycl.hcfg.graph import source_of, where
from dycl.hostgen.emit import HostCodegen
from dycl.hostgen.emit_batched import BatchedHostCodegen
from dycl.hostgen.manifest import Port
from dycl.in_process import written_inputs
from dycl.per_sample.group_onnx import group_model
from dycl.per_sample.predicable_onnx import check_predicable
from dycl.per_sample.predicate import SELECTED, if_convert, is_predicated, rejoined_gates
from dycl.per_sample.row_independence import analyse
from dycl.per_sample.semantics import check_outputs, check_request, sample_inputs, without_batch
from dycl.rewriter.errors import UnsupportedError
from dycl.rewriter.walk import bound_names

if TYPE_CHECKING:  # annotations only: the compiler imports this module
    from dycl.backends.base import Backend, CompiledVariant, OnnxStep
    from dycl.compiler import Frontend
    from dycl.hcfg.build import Built
    from dycl.hcfg.graph import HCFG
    from dycl.hcfg.levers import Levers
    from dycl.hcfg.ports import Variant


class PerSampleMode(WholeCall):
    """A batch of single samples, each on its own path (``dycl.per_sample.semantics``)."""

    per_sample = True
    times_spinning = True  # a group of tens of samples may keep a pool busy enough to spin (spin_choice)

    def serving_feeds(self, data: bytes, example: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """A group of 32 copies of the example's sample (``spin_choice.group_feeds``): a batch of 32
        before any sample leaves, so a graph goes to the calling thread only where a full group pays
        no pool (a smaller group, later on a path, costs less still)."""
        return group_feeds(data, example)

    def check_front(self, front: Frontend) -> None:
        rewritten = front.rewritten
        if rewritten.state:
            raise UnsupportedError(f"per_sample=True with module state written in forward() "
                                   f"({', '.join(s.path for s in rewritten.state)})", None,
                                   "state shared by the samples of a batch has no per-sample meaning: compile "
                                   "without per_sample")
        written_inputs.refuse_per_sample(front.written_inputs, rewritten)
        check_request(front.job.backend.name, front.example_args, list(rewritten.signature.parameters)[1:])
        check_outputs(front.output_spec)

    def optimize_graph(self, graph: HCFG, built: Built, declared: dict[str, dict[int, str]], levers: Levers) -> HCFG:
        """If-conversion (``dycl.per_sample.predicate``), where every dim is static."""
        if not levers.predicate or declared:
            return graph
        return if_convert(graph, built.produced, built.graph.body)[0]

    def graph_stats(self, graph: HCFG) -> dict[str, Any]:
        """How many conditions if-conversion turned into selections, how many stay routed."""
        selections = sum(name.startswith(SELECTED) for sub in graph.sub_dnns for statement in sub.statements
                         for name in bound_names(statement))
        return {"per_sample": {"predicated_conditions": selections, "routed_conditions": len(graph.conditions)}}

    def declared_dims(self, declared: dict[str, dict[int, str]]) -> dict[str, dict[int, str]]:
        return without_batch(declared)

    def onnx_step(self, backend: Backend) -> OnnxStep:
        def grouped(data: bytes, variant: Variant) -> bytes:
            return group_for(data, variant, backend)

        return grouped

    def check_compiled(self, variants: Mapping[str, CompiledVariant]) -> None:
        """Shape guards are checked on a sub-DNN's inputs as the host passes them; a
        per-sample host passes a group of samples, so the checks would read the wrong axes."""
        for compiled in variants.values():
            if compiled.guards:
                guard = compiled.guards[0]
                raise UnsupportedError(
                    f"per_sample=True with library code that decides on a symbolic size in Python (at "
                    f"{guard.where}: {guard.holds})", None,
                    "compile with the dims that code decides on static (dynamic=False or a dynamic= dict), "
                    "or without per_sample")

    def host_codegen(self, inputs: tuple[Port, ...]) -> tuple[type[HostCodegen], dict[str, Any]]:
        return BatchedHostCodegen, {"sample_inputs": tuple(port.name for port in inputs)}

    def manifest_inputs(self, inputs: tuple[Port, ...]) -> tuple[Port, ...]:
        return sample_inputs(inputs)


def group_for(exported: bytes, variant: Variant, backend: Backend) -> bytes:
    """The group model of a single-sample sub-DNN (``dycl.per_sample.group_onnx``), for
    ``backend``; one that cannot run ``Scan`` (TVM's ONNX importer has none) refuses a
    sub-DNN with statements that stay per sample."""
    if is_predicated(variant.sub):
        check_predicable(exported, f"{variant.sub.name} ({where(variant.sub.statements[-1]) or 'forward'})",
                         {port.name: port.shape for port in variant.inputs if port.kind == "tensor"},
                         rejoined_gates(variant.sub))
    grouped = group_model(exported)
    nodes = onnx.load_model_from_string(grouped).graph.node
    if backend.runs_onnx_scan or all(node.op_type != "Scan" for node in nodes):
        return grouped
    refusal = analyse(fold_static_shapes(onnx.load_model_from_string(exported))).first_refusal
    code = " / ".join(f"`{source_of(statement.body[0])}`" for statement in variant.sub.statements[:3])
    raise UnsupportedError(
        f"per_sample=True on backend={backend.name!r} with code that must run sample by sample ({code}: the "
        f"graph's {refusal}); its ONNX importer has no Scan to run it per sample", None,
        "use backend='onnxruntime' (it runs such statements per sample), or keep the statement per row (reduce, "
        "sort or flatten each sample's own dims)")


PER_SAMPLE = PerSampleMode()

__all__ = ["PER_SAMPLE", "PerSampleMode", "group_for"]
