"""Emit the per-sample batched host (``dycl.compile(..., per_sample=True)``).

The host of one sample is the ordinary one (``hostgen.emit``) with each sub-DNN
call turned into a ``yield`` of a request: ``_sample`` is a generator that runs
one sample's control flow and host operations as written, and asks the router
for every sub-DNN it needs. The router (``hostgen/host_router.py``, copied into the host) starts one
such generator per sample of the batch, gathers the pending requests of the
same sub-DNN (same compiled variant, same argument shapes and dtypes), runs
that sub-DNN *once* on the stacked group, and hands each sample its row back.
Conditions therefore partition the samples implicitly: each sample goes on
down its own branch and meets the others that took it at the next sub-DNN;
a sample that returns (early exit, ``break`` out of an unrolled loop then
return) leaves the active set. Host operations (counters, list appends,
``.item()`` values) run per sample on that sample's own values, as in the
single-sample host; tensor work never does.

Why this shape: it keeps the single-sample host's code (and its soundness
work) unchanged instead of re-deriving per-group semantics for every host
construct, and it groups optimally: the router always serves the pending
sub-DNN that comes first in program order (``ORDER``, a pre-order rank of the
HCFG tree, which increases along every path), so every sample that will ever
reach a sub-DNN is waiting at it when it runs.

The router's cost per batch is one generator round trip per request and one
gather per argument of each run (``_arguments``): the members' values stacked in
one C call, gathered once for positions that hold the same objects, and passed
without a copy where they are proven rows of one array in order (a sub-DNN's
output or the batch, passed on whole; ``_rows_in_order`` proves it from the owning
array, strides and data addresses, never from ``id()``; only for rows of at
least ``FAST_ROW_BYTES``, below which the proof costs more than the copy). Each
sample gets its rows of the outputs by one ``zip`` over them. Every shortcut
gives the same arrays ``np.stack`` and indexing would (tests/per_sample/
test_per_sample_gather.py checks them bit for bit).

Where ``_sample`` only moves its tensors and reads them with ``.item()`` in its tests
(``hostgen.groupable`` proves it: ``GROUPED``), the router may run it once per *group* of
samples instead (``hostgen/host_groups.py``): the group's rows stacked, a group split only
where its members' decisions differ, the part split off replaying ``_sample`` up to there on
the outputs recorded so far. It does while the last batch had at most ``GROUP_WHEN`` paths a
sample; where most samples take a path of their own the replays cost more than they save.

A program that is one sub-DNN on the per-sample inputs whose output it returns (an
early-exit network whose exits are if-converted, ``dycl.per_sample.predicate``) is
named in ``STRAIGHT``: the router runs it on the whole batch without starting a
generator per sample (what they would do: each sample's row of the output, joined).

Assumes: each compiled sub-DNN takes its inputs with a leading group dim and
returns its outputs with one (``dycl.per_sample.group_onnx``); the example (and every
sample) gives each tensor input a leading batch dim of 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import libcst as cst
from dycl.hcfg.graph import Block, Cond, Return, SubDNN
from dycl.hostgen.emit import HostCodegen
from dycl.hostgen.groupable import groupable
from dycl.hostgen.names import CONSTANTS, MODEL_CONSTANTS
from dycl.hostgen.template import runtime_copy, section


def program_order(block: Block, order: dict[int, int] | None = None) -> dict[int, int]:
    """Sub-DNN index -> its pre-order rank in the HCFG tree (increases along every path)."""
    order = {} if order is None else order
    for node in block:
        if isinstance(node, SubDNN):
            order[node.index] = len(order)
        elif isinstance(node, Cond):
            program_order(node.then, order)
            program_order(node.orelse, order)
    return order


@dataclass
class BatchedHostCodegen(HostCodegen):
    """``HostCodegen`` whose ``_forward`` is the router and whose ``_sample`` runs one sample."""

    sample_inputs: tuple[str, ...] = ()

    method: ClassVar[str] = "_sample"
    bases: ClassVar[str] = "PerSampleModel, HostModel"

    def mode_parts(self) -> list[str]:
        tables = "\n".join([
            "PER_SAMPLE = True",
            "# sub-DNN index -> its rank in program order; the router serves the first pending one",
            f"ORDER = {program_order(self.graph.body)!r}",
            "# forward()'s flat inputs that carry one sample per row of their leading dim",
            f"SAMPLE_INPUTS = {list(self.sample_inputs)!r}",
            "# (sub-DNN index, its inputs) where the program is that one sub-DNN on per-sample inputs, returned",
            f"STRAIGHT = {self.straight()!r}",
            "# _sample only moves its tensors and reads them with .item(): it runs once per group of samples",
            f"GROUPED = {self.grouped()!r}",
            "# sub-DNNs whose outputs may be sized by the numbers passed: samples group by those numbers too",
            f"SIZED_BY_VALUES = {self.sized_by_values()!r}",
        ])
        return [section("per-sample batched execution (dycl's hostgen/emit_batched.py)", tables),
                runtime_copy("host_groups.py"), runtime_copy("host_router.py")]

    def grouped(self) -> bool:
        """Whether ``_sample`` may run once per group of samples (``hostgen.groupable``): its
        sub-DNNs take and give plain arrays, and its body only moves tensors and reads ``.item()``."""
        if any(spec.input_trees or spec.output_trees or spec.scalar_outputs or spec.sizes_from_values
               for spec in self.calls.values()):
            return False
        body = self.block(self.graph.body, 2)
        if self.uses_constants:
            body.insert(0, f"{self.indent * 2}{CONSTANTS} = self.{MODEL_CONSTANTS}")
        return groupable(body, self.sample_inputs)

    def sized_by_values(self) -> frozenset[int]:
        """The sub-DNNs an output of which may be sized by the values passed (``h[:, :k]``,
        ``Variant.sizes_from_values``): samples that pass them other numbers (or 0-d arrays)
        would need outputs of other shapes, which one group run cannot give."""
        return frozenset(index for index, spec in self.calls.items() if spec.sizes_from_values)

    def straight(self) -> tuple[int, list[str]] | None:
        """``(index, inputs)`` where the whole program is one sub-DNN that reads only per-sample
        inputs, passed as they are, and whose one output is returned (an SDN whose exits are
        if-converted, ``dycl.per_sample.predicate``): the router runs it on the batch at once."""
        body = self.graph.body
        if (self.uses_constants or len(body) != 2 or not isinstance(body[0], SubDNN)
                or not isinstance(body[1], Return) or not isinstance(body[1].value, cst.Name)):
            return None
        sub, spec = body[0], self.calls[body[0].index]
        plain = not (spec.list_inputs or spec.input_trees or spec.output_trees or spec.scalar_outputs)
        if (not plain or len(spec.variants) != 1 or sub.outputs != (body[1].value.value,)
                or not set(sub.inputs) <= set(self.sample_inputs) & set(self.graph.parameters)):
            return None
        return sub.index, list(sub.inputs)

    def call_expression(self, node: SubDNN) -> str:
        """A request to the router: ``(yield (index, variant key, arguments))`` gives the outputs."""
        arguments = self.call_arguments(node)  # as the single-sample host passes them
        arguments += "," if node.inputs else ""  # a tuple, also of one (starred) argument
        return f"(yield ({node.index}, ({self.calls[node.index].key}), ({arguments})))"


__all__ = ["BatchedHostCodegen", "program_order"]
