"""Which tensor each name holds where a condition is decided: the build's example values,
followed through the graph in program order.

A sub-DNN's write gives its name the value the build saw it write (``hcfg.build.Built.produced``,
by the build's sub-DNN that held the statement: graph passes move statements between sub-DNNs,
and only a statement that was its build sub-DNN's last write of a name, at its one place in the
build's graph, shows that name's value); a rename ``a = b``, on the host or in a sub-DNN,
gives ``a`` what ``b`` holds; a statement if-conversion made gives what it recorded for its
sub-DNN (``Known.made``); any other write, and a parameter, give nothing known (None). After
a condition, a name keeps a value only where both branches leave it one of the same kind
(shape and dtype); a branch that returns leaves nothing.

Assumes the graph's sub-DNNs each ran once on the build's run with these shapes (the caller
converts only graphs compiled with every dim static). Guarantees: ``values_at_conditions``
maps each condition (by ``id``) to the names whose value is *known* there, each to a tensor
of the shape and dtype that name holds on every path reaching the condition; ``flow``
applies one block to such a map. Used by if-conversion (``dycl.per_sample.rejoin``) to prove
that both sides of a selection are tensors of one shape and dtype.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import libcst as cst
import torch

from dycl.hcfg.graph import Block, Cond, HostOp, Return, SubDNN, always_returns, walk
from dycl.hcfg.merge_renames import rename_of
from dycl.rewriter.walk import bound_names

Values = dict[str, Any]


def same_kind(a: Any, b: Any) -> bool:
    """Two tensors of one shape and dtype (no parameter: its identity matters)."""
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
            and a.dtype == b.dtype and not isinstance(a, torch.nn.Parameter) and not isinstance(b, torch.nn.Parameter))


@dataclass
class Known:
    """The build's values by the statement that wrote them (module docstring)."""

    produced: Mapping[int, Mapping[str, Any]]
    last_writes: dict[int, tuple[int, frozenset[str]]]  # id(statement) -> (its build sub-DNN, names it wrote last)
    statements: list[cst.CSTNode]  # keeps the ids above from being reused
    made: dict[int, dict[str, Any]] = field(default_factory=dict)  # a converted sub-DNN's index -> its values

    @classmethod
    def of(cls, built: Block, produced: Mapping[int, Mapping[str, Any]]) -> Known:
        """From the build's graph ``built`` (its sub-DNNs as the build made them)."""
        last: dict[int, tuple[int, frozenset[str]]] = {}
        kept: list[cst.CSTNode] = []
        shared: set[int] = set()  # one statement object at two places (an unrolled loop may share it)
        for sub in (node for node in walk(built) if isinstance(node, SubDNN)):
            later: set[str] = set()
            for statement in reversed(sub.statements):
                written = bound_names(statement)
                if id(statement) in last:
                    shared.add(id(statement))
                last[id(statement)] = (sub.index, frozenset(written - later))
                later |= written
                kept.append(statement)
        for key in shared:  # its value at one place says nothing of the other: unknown
            last[key] = (last[key][0], frozenset())
        return cls(produced, last, kept)

    def sub_values(self, sub: SubDNN, values: Values) -> None:
        """``values`` updated by the statements of ``sub``, in order."""
        for statement in sub.statements:
            written = bound_names(statement)
            rename = rename_of(HostOp(statement))
            origin = self.last_writes.get(id(statement))
            for name in written:
                if rename is not None:
                    values[name] = values.get(rename[1])
                elif origin is not None and name in origin[1]:
                    values[name] = self.produced.get(origin[0], {}).get(name)
                else:
                    values[name] = self.made.get(sub.index, {}).get(name)


def flow(nodes: Block, values: Values, known: Known, found: dict[int, Values] | None = None) -> Values:
    """``values`` after ``nodes`` (module docstring); each condition's values before it go to ``found``."""
    values = dict(values)
    for node in nodes:
        if isinstance(node, SubDNN):
            known.sub_values(node, values)
        elif isinstance(node, Cond):
            if found is not None:
                found[id(node)] = dict(values)
            values = _join(flow(node.then, values, known, found), flow(node.orelse, values, known, found),
                           always_returns(node.then), always_returns(node.orelse))
        elif (rename := rename_of(node)) is not None:
            values[rename[0]] = values.get(rename[1])
        elif not isinstance(node, Return):
            values.update(dict.fromkeys(bound_names(node.statement)))
    return values


def _join(then: Values, orelse: Values, then_returns: bool, orelse_returns: bool) -> Values:
    if then_returns:
        return orelse
    if orelse_returns:
        return then
    return {name: value for name, value in then.items() if same_kind(value, orelse.get(name))}


def values_at_conditions(body: Block, known: Known) -> dict[int, Values]:
    """Each condition's known values before it (by ``id`` of the ``Cond``)."""
    found: dict[int, Values] = {}
    flow(body, {}, known, found)
    return found


__all__ = ["Known", "Values", "flow", "rename_of", "same_kind", "values_at_conditions"]
