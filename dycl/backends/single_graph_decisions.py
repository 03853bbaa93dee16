"""The model's condition outcomes, computed by the single graph beside its path number, so that
the lowered host reports the conditions the host form does (``hostgen.decisions``).

The lowering walk (``dycl.backends.single_graph``) keeps, under the environment key ``KEY`` (no
host variable can take it: it is not an identifier), a ``TupleValue`` with one item per condition
of the HCFG, numbered in program order as ``HCFG.conditions`` lists them: ``Static(-1)`` until the
walk takes a side of it, then ``Static(1)`` or ``Static(0)`` (``decide``). The two sides of a
branch are walked in copies of the environment, so each side knows its own outcomes; where the
sides of a join decide differently, ``align`` turns the items they disagree on into rank-1 tensors,
which the join's ``If`` yields like any value the sides leave differently. At a return,
``vector`` concatenates the items into one int64 vector (a constant where the path fixes every
outcome, as on the sides of an exit): the graph's last output.

``skeleton`` is the model's control flow (its sub-DNN calls, conditions and returns) that
``hostgen.decisions.Decisions.replay`` follows to tell which conditions a call visited and which
sub-DNNs it ran.

Assumes: every ``Cond`` the walk meets is a node of the HCFG it numbers (``NotLowerable``
otherwise). Guarantees: an outcome is recorded only where the walk takes that side: statically
(its test proved) or inside the ``If`` that tests it."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from dycl.backends.onnx_compose import GraphBuilder
from dycl.backends.single_graph_values import NotLowerable, Static, Tensor, TupleValue, Value
from dycl.hcfg.graph import HCFG, Block, Cond, Return, SubDNN
from dycl.hostgen.decisions import Skeleton

#: the environment key of the outcomes (not an identifier: no host variable has it)
KEY = "#decisions"
NOT_REACHED = -1


class Numbering:
    """Each condition of ``graph``'s number (program order)."""

    def __init__(self, graph: HCFG) -> None:
        self.count = len(graph.conditions)
        self._number = {id(node): number for number, node in enumerate(graph.conditions)}

    def of(self, node: Cond) -> int:
        number = self._number.get(id(node))
        if number is None:
            raise NotLowerable("a condition that is not one of the model's (its outcome could not be reported)")
        return number

    def initial(self) -> TupleValue:
        return TupleValue((Static(NOT_REACHED),) * self.count)


def decide(env: dict[str, Value], number: int, outcome: bool) -> None:
    """Record in ``env`` that the path it belongs to took ``outcome`` at condition ``number``."""
    items = list(_items(env))
    items[number] = Static(int(outcome))
    env[KEY] = TupleValue(tuple(items))


def align(env_then: dict[str, Value], env_else: dict[str, Value], scope: GraphBuilder) -> None:
    """Before a join: the outcomes the sides disagree on as rank-1 tensors in both (constants of
    ``scope``, which both sides read), so that the join yields them from its ``If``."""
    then, orelse = list(_items(env_then)), list(_items(env_else))
    for position, (a, b) in enumerate(zip(then, orelse)):
        if a != b:
            then[position], orelse[position] = _as_tensor(a, scope), _as_tensor(b, scope)
    env_then[KEY], env_else[KEY] = TupleValue(tuple(then)), TupleValue(tuple(orelse))


def vector(env: dict[str, Value], scope: GraphBuilder) -> str:
    """The int64 vector of ``env``'s outcomes, in ``scope``."""
    pieces: list[str] = []
    run: list[int] = []
    for item in _items(env):
        if isinstance(item, Static):
            run.append(item.value)
            continue
        if not isinstance(item, Tensor):
            raise NotLowerable(f"a condition outcome the graph cannot hold ({type(item).__name__})")
        if run:
            pieces.append(scope.constant(np.array(run, np.int64)))
            run = []
        pieces.append(item.name)
    if run or not pieces:
        pieces.append(scope.constant(np.array(run, np.int64)))
    return pieces[0] if len(pieces) == 1 else scope.op("Concat", pieces, "decisions", axis=0)


def skeleton(block: Block, numbering: Numbering) -> tuple[Skeleton, ...]:
    """``block``'s calls, conditions and returns (``hostgen.decisions``)."""
    nodes: list[Skeleton] = []
    for node in block:
        if isinstance(node, SubDNN):
            nodes.append(["call", node.index])
        elif isinstance(node, Return):
            nodes.append(["return"])
        elif isinstance(node, Cond):
            nodes.append(["if", numbering.of(node), list(skeleton(node.then, numbering)),
                          list(skeleton(node.orelse, numbering))])
    return tuple(nodes)


def _items(env: dict[str, Value]) -> tuple[Value, ...]:
    value = env[KEY]
    assert isinstance(value, TupleValue)
    return value.items


def _as_tensor(item: Value, scope: GraphBuilder) -> Value:
    if isinstance(item, Static):
        return Tensor(scope.constant(np.array([item.value], np.int64)), TensorProto.INT64)
    return item


__all__ = ["KEY", "NOT_REACHED", "Numbering", "align", "decide", "skeleton", "vector"]
