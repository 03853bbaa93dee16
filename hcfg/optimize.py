"""Graph optimisation (paper §5.4): computation-free work leaves the sub-DNNs.

- *Identity outputs* — a tensor handed on unchanged (``prev = x``) — are host
  assignments from the start: the builder places reference moves in the host
  (unless ``optimize=False``).
- *Constant outputs* — values that do not depend on any input of their
  sub-DNN (``h = torch.zeros(1, 16)``) — are computed once at compile time and
  become host assignments of stored arrays; a sub-DNN left without
  computation disappears (liveness drops it). A stored array would be shared by
  every call, and the example's value is the one the build walk left (which ran
  the host's writes on it), so a variable the host writes into in place
  (``buf[:, i] = v``, ``buf += v``, also through an alias) stays a sub-DNN output,
  computed afresh on every call.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import libcst as cst
import torch
from dycl.hcfg.annotate import annotate
from dycl.hcfg.graph import HCFG, Block, Cond, HostOp, Node, Return, SubDNN, walk
from dycl.hcfg.host_aliases import alias_classes, with_aliases
from dycl.hcfg.liveness import EffectsMemo, reads_writes, statement_reads_writes
from dycl.hcfg.passes import graph_pass
from dycl.hcfg.randomness import may_be_random
from dycl.hcfg.trace import Examples
from dycl.rewriter.errors import UnsupportedError
from dycl.rewriter.locations import LocationTable, comment_of, set_location
from dycl.rewriter.walk import bound_names


def constant_outputs(sub: SubDNN, locals_: frozenset[str], memo: EffectsMemo | None = None) -> set[str]:
    """Outputs of ``sub`` computed without reading any of its inputs, nor anything that
    may draw random numbers (``hcfg.randomness``)."""
    dependent = set(sub.inputs)
    for stmt in sub.statements:
        reads, writes = statement_reads_writes(stmt, locals_, memo)
        if reads & dependent or may_be_random(stmt, locals_):
            dependent |= writes
    return set(sub.outputs) - dependent


CONSTANTS = "_constants"


@graph_pass
def hoist_constants(graph: HCFG, examples: dict[int, Examples]) -> tuple[HCFG, dict[str, Any]]:
    """Move constant sub-DNN outputs to the host; return the new graph and the
    constants by key (``"<variable>@<sub-DNN index>"``). Host code reads them
    from the dict ``_constants``."""
    if CONSTANTS in graph.locals:
        raise _reserved_name(graph)
    constants: dict[str, Any] = {}
    written = _written_in_place(graph)

    def block(nodes: Block) -> Block:
        out: list[Node] = []
        for node in nodes:
            if isinstance(node, Cond):
                out.append(replace(node, then=block(node.then), orelse=block(node.orelse)))
                continue
            out.append(node)
            if not isinstance(node, SubDNN):
                continue
            fixed = constant_outputs(node, graph.locals, graph.effects)
            values = examples[node.index].outputs[0]
            for name, value in zip(node.outputs, values):
                if name in fixed and name not in written and isinstance(value, torch.Tensor):
                    key = f"{name}@{node.index}"
                    constants[key] = value.detach().clone()
                    out.append(HostOp(_constant_assignment(name, key, node.statements[0])))
        return tuple(out)

    new_graph = annotate(graph.with_body(block(graph.body)))
    return new_graph, constants


def _reserved_name(graph: HCFG) -> UnsupportedError:
    statements = [s for n in walk(graph.body) if not isinstance(n, Cond)
                  for s in (n.statements if isinstance(n, SubDNN) else (n.statement,))]
    where = next((s for s in statements if CONSTANTS in bound_names(s)), None)
    return UnsupportedError(f"a variable named {CONSTANTS!r}, a name the generated host uses for itself",
                            LocationTable().resolve(where), f"rename the variable {CONSTANTS!r}")


def _written_in_place(graph: HCFG) -> set[str]:
    """Locals whose array a host operation writes into in place: the base of a subscript
    or attribute target, an augmented assignment's name; with every alias of each."""
    bases: set[str] = set()
    for node in walk(graph.body):
        if not isinstance(node, HostOp):
            continue
        for small in node.statement.body:
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else (
                [small.target] if isinstance(small, cst.AugAssign) else [])
            for target in targets:
                while isinstance(target, cst.Subscript | cst.Attribute):
                    target = target.value
                    if isinstance(target, cst.Name):
                        bases.add(target.value)
                if isinstance(small, cst.AugAssign) and isinstance(target, cst.Name):
                    bases.add(target.value)
    classes = alias_classes(graph.body, graph.locals)
    return bases | {alias for name in bases for alias in classes.get(name, ())}


def _constant_assignment(name: str, key: str, like: cst.CSTNode) -> cst.SimpleStatementLine:
    value = cst.parse_expression(f"{CONSTANTS}[{key!r}]")
    line = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], value)])
    return set_location(line, comment_of(like))


@graph_pass
def merge_into_producers(graph: HCFG) -> HCFG:
    """Fold a sub-DNN into an earlier sub-DNN of the same block when nothing in
    between can tell the difference, so the host makes fewer calls.

    Note: which sub-DNN may move. ``N`` moves into the nearest earlier sub-DNN ``P``
    of its block when every node between them (host operations and conditions,
    searched into their branches) neither writes a variable ``N`` reads, nor reads
    or writes a variable ``N`` writes (names compared by alias class, ``hcfg.host_aliases``:
    ``s = stats; s["k"] = v`` writes ``stats``), and no ``return`` lies between them — then
    ``N`` runs on exactly the paths it ran on before, on the same values. Typical
    case: the tensor part of a test (``policy[0, t]``) that depends only on a
    value computed at the start.
    """

    classes = alias_classes(graph.body, graph.locals)  # s = state_stats; s["k"] = 1 writes state_stats

    def block(nodes: Block) -> Block:
        out: list[Node] = []
        for node in nodes:
            if isinstance(node, Cond):
                node = replace(node, then=block(node.then), orelse=block(node.orelse))
            if isinstance(node, SubDNN):
                target = _producer_index(out, node, graph.locals, graph.effects, classes)
                if target is not None:
                    producer = out[target]
                    out[target] = replace(producer, statements=producer.statements + node.statements)
                    continue
            out.append(node)
        return tuple(out)

    return annotate(graph.with_body(block(graph.body)))


def _producer_index(nodes: list[Node], sub: SubDNN, locals_: frozenset[str], memo: EffectsMemo,
                    classes: dict[str, frozenset[str]]) -> int | None:
    reads, writes = reads_writes(sub, locals_, memo)
    reads, writes = with_aliases(reads, classes), with_aliases(writes, classes)
    for index in range(len(nodes) - 1, -1, -1):
        node = nodes[index]
        if isinstance(node, SubDNN):
            return index
        if isinstance(node, Return) or (isinstance(node, Cond) and _may_return(node)):
            return None
        node_reads, node_writes = _all_reads_writes(node, locals_, memo)
        node_writes = with_aliases(node_writes, classes)
        if node_writes & (reads | writes) or node_reads & writes:
            return None
    return None


def _may_return(node: Cond) -> bool:
    return any(isinstance(n, Return) for n in walk((node,)))


def _all_reads_writes(node: Node, locals_: frozenset[str], memo: EffectsMemo) -> tuple[set[str], set[str]]:
    """What ``node`` (and its branches) reads and writes; ``lst.append(x)`` writes ``lst``."""
    reads: set[str] = set()
    writes: set[str] = set()
    for inner in walk((node,)):
        r, w = reads_writes(inner, locals_, memo)
        reads |= r
        writes |= w
        if isinstance(inner, HostOp):
            writes |= _mutated(inner.statement) & locals_
    return reads, writes


def _mutated(stmt: cst.SimpleStatementLine) -> set[str]:
    """Variables whose object a statement changes in place (``lst.append(x)``, ``cfg["k"].append(x)``,
    ``lst[0] = y``)."""
    small = stmt.body[0]
    call = small.value if isinstance(small, cst.Expr) else None
    if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute):
        receiver = call.func.value
        while isinstance(receiver, (cst.Subscript, cst.Attribute)):  # cfg["k"].append(x) changes cfg
            receiver = receiver.value
        return {receiver.value} if isinstance(receiver, cst.Name) else set()
    targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else (
        [small.target] if isinstance(small, (cst.AugAssign, cst.AnnAssign)) else [])
    names = set()
    for target in targets:
        while isinstance(target, (cst.Subscript, cst.Attribute)):
            target = target.value
            if isinstance(target, cst.Name):
                names.add(target.value)
    return names
