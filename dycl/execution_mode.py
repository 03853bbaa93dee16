"""How a compiled model is executed, as hooks the compiler's stages call (``dycl.compiler``).

The default mode, ``WholeCall``, runs the model as eager runs it: one call, one path; every
hook leaves its stage's value as it is. ``dycl.per_sample.mode.PerSampleMode`` (``per_sample=True``)
overrides them to run a batch of single samples, each on its own path. A stage never asks
which mode it runs in: it calls its hook.

Assumes: each hook is called with its stage's typed value, once per compile. Guarantees (of
``WholeCall``): each hook is the identity, refuses nothing and turns nothing on or off, so
the compiler behaves as if there were no hooks at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dycl.hostgen.emit import HostCodegen
from dycl.hostgen.manifest import Port

if TYPE_CHECKING:  # annotations only: the compiler imports this module
    from dycl.backends.base import Backend, CompiledVariant, OnnxStep
    from dycl.compiler import Frontend
    from dycl.hcfg.build import Built
    from dycl.hcfg.graph import HCFG
    from dycl.hcfg.levers import Levers


class WholeCall:
    """The default execution mode: the compiled model is called as the model is."""

    #: written into the manifest (``Manifest.per_sample``): how the host runs the sub-DNNs
    per_sample = False
    #: whether a small ONNX Runtime graph may run on the calling thread (``dycl.backends.onnx_cost``)
    small_graphs_on_caller = True
    #: whether a graph's pool spinning within runs is timed at a group's size (``dycl.backends.spin_choice``)
    times_spinning = False

    def serving_feeds(self, data: bytes, example: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The inputs by name that a call of the ONNX graph ``data`` typically gets, given its
        example's: what its thread choice is decided on (``dycl.backends.thread_choice``)."""
        return example

    def check_front(self, front: Frontend) -> None:
        """*rewrite*: refuse, before anything is compiled, a model this mode cannot run."""

    def optimize_graph(self, graph: HCFG, built: Built, declared: dict[str, dict[int, str]], levers: Levers) -> HCFG:
        """*optimize*: the HCFG after the graph optimisation, given what building it observed
        and the inputs' symbolic dims."""
        return graph

    def graph_stats(self, graph: HCFG) -> dict[str, Any]:
        """*emit*: what this mode did to the graph, for ``stats``."""
        return {}

    def declared_dims(self, declared: dict[str, dict[int, str]]) -> dict[str, dict[int, str]]:
        """*explore*: the symbolic dims of the inputs (name -> axis -> dim) each sub-DNN is compiled for."""
        return declared

    def onnx_step(self, backend: Backend) -> OnnxStep | None:
        """*compile*: the step each exported ONNX graph goes through (``dycl.backends.base``)."""
        return None

    def check_compiled(self, variants: Mapping[str, CompiledVariant]) -> None:
        """*compile*: refuse compiled variants this mode cannot run."""

    def host_codegen(self, inputs: tuple[Port, ...]) -> tuple[type[HostCodegen], dict[str, Any]]:
        """*emit*: the host's code generator and its extra arguments, given the model's tensor inputs."""
        return HostCodegen, {}

    def manifest_inputs(self, inputs: tuple[Port, ...]) -> tuple[Port, ...]:
        """*emit*: the manifest's input table, from the model's tensor inputs as the example has them."""
        return inputs


WHOLE_CALL = WholeCall()

__all__ = ["WHOLE_CALL", "WholeCall"]
