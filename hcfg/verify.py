"""The HCFG verifier (torch.fx ``Graph.lint``): ``HCFG.check()`` runs it.

Held by construction — the representation cannot break them: the body is the
one entry; control only moves forward (into a branch, or on to the join after
a condition), so the graph is acyclic and every edge ends at a node of the
graph; a condition has exactly two successors (its ``then`` and ``orelse``
blocks; an empty one goes straight to the join); a return has none.

Checked — each broken one raises ``HCFGInvariantError`` naming the node (with
the user's file:line) and the invariant:

``node-kind``
    every block is a tuple of ``SubDNN``/``HostOp``/``Cond``/``Return`` nodes;
    a sub-DNN holds at least one statement; every statement a node holds
    (a condition aside) is one ``SimpleStatementLine``.
``unique-node``
    no node object appears twice (analyses key nodes by identity).
``unique-index``
    sub-DNN indices are distinct, and so are condition indices.
``unique-parameter``
    the parameters are distinct names.
``reachable``
    nothing follows, in its block, a return or a condition both of whose
    branches always return: every node is reachable from the entry.
``defined-before-use``
    every variable a node reads is assigned on every path from the entry to
    it (the parameters are assigned at the entry).
``no-dead-code``
    no dead node and no dead sub-DNN statement (``hcfg.liveness`` terms): the
    graph is what ``annotate`` leaves.
``ports``
    every sub-DNN's ``inputs``/``outputs`` are its ports under liveness.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
from dycl.hcfg.liveness import Liveness
from dycl.hcfg.nodes import Block, Cond, HostOp, Return, SubDNN, always_returns, source_of, where

if TYPE_CHECKING:
    from dycl.hcfg.graph import HCFG


class HCFGInvariantError(Exception):
    """An HCFG breaks an invariant of ``hcfg.verify``: a bug in dycl, never in the user's model.

    ``invariant`` is its name (``"ports"``, ...), ``node`` the offending node
    (None for the graph as a whole), ``after`` the graph pass that produced the graph."""

    def __init__(self, invariant: str, node: object, detail: str, graph: str = "", after: str | None = None) -> None:
        self.invariant = invariant
        self.node = node
        self.after = after
        where = f" at {describe(node)}" if node is not None else ""
        which = f"the HCFG of {graph}" if graph else "the HCFG"
        when = f" after {after}" if after else ""
        super().__init__(f"{which}{when} breaks invariant {invariant!r}{where}: {detail} (a dycl bug)")


def describe(node: object) -> str:
    """A node as an error names it: its kind, index or text, and the user's line."""
    if isinstance(node, SubDNN):
        return f"sub-DNN {node.index}{_where(node.statements[0] if node.statements else None)}"
    if isinstance(node, Cond):
        return f"condition {node.index} `if {_text(node.test)}`{_where(node.statement)}"
    if isinstance(node, HostOp):
        return f"host operation `{_text(node.statement)}`{_where(node.statement)}"
    if isinstance(node, Return):
        return f"return `{_text(node.value)}`{_where(node.statement)}"
    return f"a {type(node).__name__} object"


def _text(node: object) -> str:
    if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1:
        node = node.body[0]
    return source_of(node) if isinstance(node, cst.CSTNode) else repr(node)


def _where(stmt: object) -> str:
    line = where(stmt)
    return f" ({line})" if line else ""


_KIND = {SubDNN: "sub-DNN", Cond: "condition"}


def verify(graph: HCFG, after: str | None = None) -> None:
    """Check every invariant of the module docstring; raise ``HCFGInvariantError`` on the first broken."""
    _Verifier(graph, after).run()


class _Verifier:
    def __init__(self, graph: HCFG, after: str | None) -> None:
        self.graph = graph
        self.after = after
        self.seen: set[int] = set()
        self.indices: dict[type, set[int]] = {SubDNN: set(), Cond: set()}

    def fail(self, invariant: str, node: object, detail: str) -> HCFGInvariantError:
        return HCFGInvariantError(invariant, node, detail, self.graph.name, self.after)

    def run(self) -> None:
        parameters = self.graph.parameters
        if len(set(parameters)) != len(parameters):
            raise self.fail("unique-parameter", None, f"parameters {list(parameters)}")
        self.shape(self.graph.body)
        self.defined(self.graph.body, set(parameters))
        self.live(self.graph.body, self.graph.liveness)

    def shape(self, block: object) -> None:
        """``node-kind``, ``unique-node``, ``unique-index`` and ``reachable``, in program order."""
        if not isinstance(block, tuple):
            raise self.fail("node-kind", None, f"a block is a {type(block).__name__}, not a tuple of nodes")
        for position, node in enumerate(block):
            self.node_kind(node)
            if id(node) in self.seen:
                raise self.fail("unique-node", node, "the same node object appears twice in the graph")
            self.seen.add(id(node))
            if isinstance(node, (SubDNN, Cond)):
                taken = self.indices[type(node)]
                if node.index in taken:
                    raise self.fail("unique-index", node, f"another {_KIND[type(node)]} has index {node.index}")
                taken.add(node.index)
            if isinstance(node, Cond):
                self.shape(node.then)
                self.shape(node.orelse)
            if position + 1 < len(block) and always_returns((node,)):
                raise self.fail("reachable", block[position + 1], f"it follows {describe(node)}, which always "
                                "returns: no path reaches it")

    def node_kind(self, node: object) -> None:
        if isinstance(node, SubDNN):
            statements = node.statements
            if not statements:
                raise self.fail("node-kind", node, "a sub-DNN without statements")
        elif isinstance(node, (HostOp, Return, Cond)):
            statements = (node.statement,) if not isinstance(node, Cond) else ()
        else:
            raise self.fail("node-kind", node, "a block holds something that is not an HCFG node")
        for stmt in statements:
            if not isinstance(stmt, cst.SimpleStatementLine):
                raise self.fail("node-kind", node, f"it holds a {type(stmt).__name__}, not one simple statement")

    def defined(self, block: Block, defined: set[str]) -> set[str] | None:
        """``defined-before-use``: the variables assigned on every path through ``block``
        (None when every path returns)."""
        for node in block:
            reads, writes = self.graph.liveness.reads_writes(node)
            missing = reads - defined
            if missing:
                raise self.fail("defined-before-use", node, f"reads {sorted(missing)}, which some path to it "
                                "does not assign")
            if isinstance(node, Return):
                return None
            if isinstance(node, Cond):
                outs = [d for d in (self.defined(node.then, set(defined)), self.defined(node.orelse, set(defined)))
                        if d is not None]
                if not outs:
                    return None
                defined = set.intersection(*outs)
            defined |= writes
        return defined

    def live(self, block: Block, liveness: Liveness) -> None:
        """``no-dead-code`` and ``ports``."""
        for node in block:
            if liveness.is_dead(node):
                raise self.fail("no-dead-code", node, "nothing it computes is used (liveness drops it)")
            if isinstance(node, Cond):
                self.live(node.then, liveness)
                self.live(node.orelse, liveness)
            if not isinstance(node, SubDNN):
                continue
            kept = {id(s) for s in liveness.kept[id(node)]}
            dead = [s for s in node.statements if id(s) not in kept]
            if dead:
                raise self.fail("no-dead-code", node, f"its statement `{_text(dead[0])}` computes nothing "
                                "that is used")
            ports = liveness.ports(node)
            if (node.inputs, node.outputs) != ports:
                raise self.fail("ports", node, f"inputs {list(node.inputs)} and outputs {list(node.outputs)}, "
                                f"but liveness gives inputs {list(ports[0])} and outputs {list(ports[1])}")


__all__ = ["HCFGInvariantError", "describe", "verify"]
