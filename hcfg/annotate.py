"""The graph pass that applies liveness: dead code removed, every sub-DNN's ports filled in.

Assumes a graph whose ``liveness`` (``hcfg.liveness``) is that of its body; guarantees a new
graph with the same control flow in which no statement or node is dead, and each sub-DNN's
``inputs``/``outputs`` are its live-in/live-out variables (its ports)."""

from __future__ import annotations

from dataclasses import replace

from dycl.hcfg.graph import HCFG
from dycl.hcfg.liveness import Liveness
from dycl.hcfg.nodes import Block, Cond, Node, SubDNN
from dycl.hcfg.passes import graph_pass


@graph_pass
def annotate(graph: HCFG) -> HCFG:
    """``graph`` without its dead code, every sub-DNN's inputs and outputs its ports."""
    return graph.with_body(_apply(graph.body, graph.liveness))


def _apply(block: Block, liveness: Liveness) -> Block:
    nodes: list[Node] = []
    for node in block:
        if liveness.is_dead(node):
            continue
        if isinstance(node, Cond):
            node = replace(node, then=_apply(node.then, liveness), orelse=_apply(node.orelse, liveness))
        elif isinstance(node, SubDNN):
            inputs, outputs = liveness.ports(node)
            node = replace(node, statements=liveness.kept[id(node)], inputs=inputs, outputs=outputs)
        nodes.append(node)
    return tuple(nodes)


__all__ = ["annotate"]
