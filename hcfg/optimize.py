"""Graph optimisation (paper §5.4): computation-free work leaves the sub-DNNs.

- *Identity outputs* — a tensor handed on unchanged (``prev = x``) — are host
  assignments from the start: the builder places reference moves in the host
  (unless ``optimize=False``).
- *Constant outputs* — values that do not depend on any input of their
  sub-DNN (``h = torch.zeros(1, 16)``) — are computed once at compile time and
  become host assignments of stored arrays; a sub-DNN left without
  computation disappears (liveness drops it).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import libcst as cst
import torch

from hcfg.graph import HCFG, Block, Cond, HostOp, Node, SubDNN
from hcfg.liveness import _statement_reads_writes, annotate
from hcfg.trace import Examples
from rewriter.locations import comment_of, set_location

_RANDOM = ("rand", "normal", "bernoulli", "multinomial", "dropout", "poisson", "uniform_", "exponential")


def constant_outputs(sub: SubDNN, locals_: frozenset[str]) -> set[str]:
    """Outputs of ``sub`` computed without reading any of its inputs (nor randomness)."""
    dependent = set(sub.inputs)
    for stmt in sub.statements:
        reads, writes = _statement_reads_writes(stmt, locals_)
        if reads & dependent or _is_random(stmt):
            dependent |= writes
    return set(sub.outputs) - dependent


def _is_random(stmt: cst.CSTNode) -> bool:
    text = cst.Module([stmt]).code
    return any(word in text for word in _RANDOM)


CONSTANTS = "_constants"


def hoist_constants(graph: HCFG, examples: dict[int, Examples]) -> tuple[HCFG, dict[str, Any]]:
    """Move constant sub-DNN outputs to the host; return the new graph and the
    constants by key (``"<variable>@<sub-DNN index>"``). Host code reads them
    from the dict ``_constants``."""
    assert CONSTANTS not in graph.locals, "the model uses dycl's reserved name _constants"
    constants: dict[str, Any] = {}

    def block(nodes: Block) -> Block:
        out: list[Node] = []
        for node in nodes:
            if isinstance(node, Cond):
                out.append(replace(node, then=block(node.then), orelse=block(node.orelse)))
                continue
            out.append(node)
            if not isinstance(node, SubDNN):
                continue
            fixed = constant_outputs(node, graph.locals)
            values = examples[node.index].outputs[0]
            for name, value in zip(node.outputs, values):
                if name in fixed and isinstance(value, torch.Tensor):
                    key = f"{name}@{node.index}"
                    constants[key] = value.detach().clone()
                    out.append(HostOp(_constant_assignment(name, key, node.statements[0])))
        return tuple(out)

    new_graph = annotate(graph.with_body(block(graph.body)))
    return new_graph, constants


def _constant_assignment(name: str, key: str, like: cst.CSTNode) -> cst.SimpleStatementLine:
    value = cst.parse_expression(f"{CONSTANTS}[{key!r}]")
    line = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], value)])
    return set_location(line, comment_of(like))
