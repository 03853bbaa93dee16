"""The one options object for compile-time optimisations: every switch, so that
each one can be measured by turning it off (``benchmarks/ablation.py``).
Everything is on by default; the generated host is correct with any combination.

``dycl.compile(optimize=...)`` takes a bool or a ``Levers``; ``Levers.of`` says
what a bool means, so that no other code interprets ``optimize`` itself: the
compiler carries only the ``Levers`` (``dycl.compiler.Options.levers``), the one
source of truth, and a ``Levers`` cannot hold switches that disagree (with
``optimize_graph`` off, both merges are off too)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Levers:
    """``optimize_graph``: the HCFG's graph optimisation (paper §5.4): outputs
    that are an unchanged input or a constant leave their sub-DNN for the host
    (``hcfg.optimize.hoist_constants``), and sub-DNNs merge into producers; off,
    ``merge_into_producers`` is off too.
    ``conditions_in_producers``: the tensor part of an ``if`` test is computed by
    the sub-DNN before it (off: by a sub-DNN of its own, which
    ``merge_into_producers`` folds back where nothing lies between them).
    ``merge_into_producers``: a sub-DNN moves into an earlier one across host
    operations that cannot tell the difference (``hcfg.optimize.merge_into_producers``).
    ``merge_across_renames``: a sub-DNN, host renames of its values (``residual = h``)
    and the sub-DNN right after them become one sub-DNN (``hcfg.merge_renames``).
    ``reuse_identical``: identical sub-DNNs (code, weights and ports) are compiled
    once and share a file and a session.
    ``small_graphs_on_caller``: an ONNX Runtime sub-DNN too small to pay for a thread
    pool's hand-off runs on the calling thread: counted (``dycl.backends.onnx_cost``), and
    timed on its example where the count does not settle it (``dycl.backends.thread_choice``).
    ``single_graph``: "auto", the default (the host and the whole graph as one ONNX model with
    ``If`` nodes timed side by side at compile time, the one graph kept unless the host is clearly faster;
    neither lowered nor timed for one sub-DNN without conditions or a tiny model:
    ``dycl.backends.single_graph_choice``), "on" (the one graph, one session call per model call,
    wherever it can be lowered) or "off" (the host calls each sub-DNN):
    ``dycl.backends.single_graph_stage``. Either form reports the model's conditions to coverage
    and the self-check (``hostgen.decisions``).
    ``predicate``: per-sample compiles only: a condition whose branches are side-effect-free
    sub-DNNs ending in ``return`` runs both branches on the whole group and selects each
    sample's row (``dycl.per_sample.predicate``) instead of routing the samples."""

    optimize_graph: bool = True
    conditions_in_producers: bool = True
    merge_into_producers: bool = True
    merge_across_renames: bool = True
    reuse_identical: bool = True
    small_graphs_on_caller: bool = True
    single_graph: str = "auto"
    predicate: bool = True

    def __post_init__(self) -> None:
        if self.single_graph not in SINGLE_GRAPH:
            raise ValueError(f"single_graph must be one of {SINGLE_GRAPH}, not {self.single_graph!r}")
        if not self.optimize_graph:  # merging is part of the graph optimisation
            object.__setattr__(self, "merge_into_producers", False)
            object.__setattr__(self, "merge_across_renames", False)

    @classmethod
    def of(cls, optimize: bool | Levers) -> Levers:
        """The levers ``optimize`` asks for: True, all on; False, the graph
        optimisation off (the §5.4 ablation); a ``Levers``, itself."""
        if isinstance(optimize, Levers):
            return optimize
        if isinstance(optimize, bool):
            return ALL_ON if optimize else cls(optimize_graph=False)
        raise TypeError(f"optimize must be True, False or a dycl.hcfg.levers.Levers, got {type(optimize).__name__}")


SINGLE_GRAPH = ("off", "on", "auto")
ALL_ON = Levers()

__all__ = ["ALL_ON", "SINGLE_GRAPH", "Levers"]
