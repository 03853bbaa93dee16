"""If-conversion of a condition whose branches *rejoin* (a gate: ``if g.item() > 0.5: x = x +
block(x)``, then the network goes on): the condition becomes one sub-DNN that computes the
test, both branches in their own names, and selects per sample every name a branch writes::

    _dycl_selected_3 = g > 0.5                       # the host's test, exactly (graph_test)
    <then-branch statements, every name they write renamed>
    <else-branch statements, likewise>
    x = x_1.where(_dycl_selected_3.reshape(1, 1, 1, 1), x)   # one line per name live after the join

A test with a sample dim (``g`` of shape ``(1, 1)``) is reshaped to the selected value's rank,
all ones, so that in the group model (``dycl.per_sample.group_onnx``) its dim 0 stays the
samples' and each row selects its own (a 0-dim test, ``conf.max() > t``, is left as it is:
``row_independence`` broadcasts it per sample).

Consecutive sub-DNNs and the renames between them are then folded into one
(``merge_adjacent``), so a chain of gates becomes one sub-DNN.

Assumes ``values`` holds the names whose tensor is known before the condition
(``dycl.per_sample.value_flow``) and ``live`` the names live after it. Guarantees (else
``convert`` returns None and the condition stays routed): neither branch returns or raises;
each holds only sub-DNNs and host renames ``a = b``, of plain statements (``predicate._plain``:
no in-place write, no scope a rename could misread); the test is computed in the graph as the
host computes it (``graph_test``); every name a branch writes that is live after the join is,
on both sides, a known tensor of one shape and of one dtype of ``SELECTABLE`` (a bool is
selected by logic, ``(t & a) | (~t & b)``). A selected row is then the one the
sample's own test picks; what may fail on another sample's data is refused after export
(``predicable_onnx``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import libcst as cst
import torch

from dycl.hcfg.graph import Block, Cond, HostOp, Node, SubDNN, always_returns
from dycl.hcfg.merge_renames import may_write_in_place
from dycl.per_sample.graph_test import in_graph, tested_name
from dycl.per_sample.value_flow import Known, Values, flow, rename_of, same_kind
from dycl.rewriter.walk import bound_names

#: the dtypes a selection handles: those of ONNX Runtime's CPU ``Where`` kernels, and bool
SELECTABLE = frozenset({torch.bool, torch.uint8, torch.int8, torch.int32, torch.int64, torch.float16, torch.float32,
                        torch.float64})


@dataclass(frozen=True)
class Converted:
    """The sub-DNN that replaces a condition, and the examples of the names it writes."""

    sub: SubDNN
    examples: dict[str, Any]


def convert(cond: Cond, values: Values, live: frozenset[str], index: int, selected: str,
            known: Known, branch: Callable[[list[cst.SimpleStatementLine]], Any],
            ) -> Converted | None:
    """``cond`` as one sub-DNN numbered ``index`` whose test is bound to ``selected``, or None
    (module docstring). ``branch`` renames a branch's statements (``predicate._Renaming``)."""
    if always_returns(cond.then) or always_returns(cond.orelse):
        return None
    name = tested_name(cond.test)
    test = None if name is None else in_graph(cond.test, values.get(name))
    sides = [_statements(block) for block in (cond.then, cond.orelse)]
    if test is None or sides[0] is None or sides[1] is None:
        return None
    after = [flow(block, values, known) for block in (cond.then, cond.orelse)]
    written = set().union(*[{n for s in side for n in bound_names(s)} for side in sides]) & live
    if not all(same_kind(after[0].get(n), after[1].get(n)) and after[0][n].dtype in SELECTABLE for n in written):
        return None
    renamed = [branch(side) for side in sides]  # each (statements, read), or None: a statement not plain
    if renamed[0] is None or renamed[1] is None:
        return None
    line = cond.statement.body.header
    statements = [cst.parse_statement(f"{selected} = {test}").with_changes(trailing_whitespace=line)]
    statements += renamed[0][0] + renamed[1][0]
    tested = values[name]  # type: ignore[index]
    for target in sorted(written):
        then_value, else_value = renamed[0][1](target), renamed[1][1](target)
        test_source = _shaped(selected, tested.dim(), after[0][target].dim())
        select = cst.parse_statement(_selection(target, test_source, then_value, else_value, after[0][target].dtype))
        statements.append(select.with_changes(trailing_whitespace=line))
    examples = {target: after[0][target] for target in written}
    return Converted(SubDNN(index, tuple(statements)), examples)


def _shaped(test: str, test_rank: int, rank: int) -> str:
    """``test`` shaped to select a value of ``rank`` row by row (module docstring)."""
    if test_rank == 0 or test_rank == rank and rank > 0:
        return test
    return f"{test}.reshape({', '.join(['1'] * rank)}{',' if rank == 1 else ''})" if rank else f"{test}.reshape(())"


def _selection(target: str, test: str, then_value: str, else_value: str, dtype: torch.dtype) -> str:
    """``target = <then_value where test, else else_value>``; a bool as logic (ONNX Runtime's
    CPU ``Where`` has no bool kernel)."""
    if dtype == torch.bool:
        return f"{target} = {test} & {then_value} | ~{test} & {else_value}"
    return f"{target} = {then_value}.where({test}, {else_value})"


def _statements(block: Block) -> list[cst.SimpleStatementLine] | None:
    """The statements of a branch of sub-DNNs and host renames, else None."""
    statements: list[cst.SimpleStatementLine] = []
    for node in block:
        if isinstance(node, SubDNN):
            statements += node.statements
        elif rename_of(node) is not None:
            statements.append(node.statement)  # type: ignore[union-attr]
        else:
            return None
    return statements


def merge_adjacent(nodes: Block, values: Values, known: Known, rejoined: set[int]) -> Block:
    """``nodes`` with each sub-DNN folded into the sub-DNN before it, across host renames of
    known tensors, where one of the two is a converted condition (index in ``rejoined``) and
    the later one writes nothing in place; renames at a run's end stay on the host. The
    merged sub-DNN keeps the first's index (added to ``rejoined``) and the values both made
    (``known.made``)."""
    out: list[Node] = []
    pending: list[HostOp] = []  # renames after the last sub-DNN of ``out``
    for node in nodes:
        rename = rename_of(node)
        last = out[-1] if out and isinstance(out[-1], SubDNN) else None
        if rename is not None and last is not None and values.get(rename[1]) is not None:
            pending.append(node)  # type: ignore[arg-type]
        elif (isinstance(node, SubDNN) and last is not None and rejoined & {last.index, node.index}
              and not may_write_in_place(node)):
            moved = tuple(r.statement for r in pending)
            out[-1] = replace(last, statements=last.statements + moved + node.statements)
            known.made.setdefault(last.index, {}).update(known.made.get(node.index, {}))
            rejoined.add(last.index)  # a run that holds a converted condition goes on
            pending = []
        else:
            out += pending
            pending = []
            out.append(node)
        values = flow((node,), values, known)
    return tuple(out + pending)


__all__ = ["Converted", "convert", "merge_adjacent"]
