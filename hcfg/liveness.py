"""Liveness over the HCFG: which variables each sub-DNN takes and gives back.

A variable is *live* at a point if some path from there reads it before
assigning it. A sub-DNN's inputs are the variables it reads before assigning;
its outputs are the variables it assigns that are live after it. Tensor
statements whose results are dead are dropped (tensor code has no side
effects), as are sub-DNNs left empty and conditions with two empty branches.
"""

from __future__ import annotations

from dataclasses import replace

import libcst as cst
from dycl.hcfg.aliasing import updated_in_place
from dycl.hcfg.graph import HCFG, Block, Cond, HostOp, Node, Return, SubDNN
from dycl.rewriter.flow import else_body
from dycl.rewriter.walk import bound_names, read_names


def _statement_reads_writes(stmt: cst.CSTNode, locals_: frozenset[str]) -> tuple[set[str], set[str]]:
    reads = read_names(stmt) & locals_
    small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else stmt
    if isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name):
        reads.add(small.target.value)
    # out.index_add_(0, i, v) (also as `t = out.index_add_(...)`) updates out: it is read and written
    updated = set(updated_in_place(stmt)) & locals_
    if isinstance(small, cst.Expr):  # lst.append(x) updates lst: it is read and written
        return reads, updated
    return reads, (bound_names(stmt) & locals_) | updated


def reads_writes(node: Node, locals_: frozenset[str]) -> tuple[set[str], set[str]]:
    """Variables ``node`` reads before assigning them, and variables it assigns
    (for a Cond: its test only)."""
    if isinstance(node, SubDNN):
        reads: set[str] = set()
        writes: set[str] = set()
        for stmt in node.statements:
            r, w = _statement_reads_writes(stmt, locals_)
            reads |= r - writes
            writes |= w
        return reads, writes
    if isinstance(node, HostOp):
        return _statement_reads_writes(node.statement, locals_)
    if isinstance(node, Cond):
        return read_names(node.test) & locals_, set()
    return read_names(node.value) & locals_, set()


def annotate(graph: HCFG) -> HCFG:
    """``graph`` with every sub-DNN's inputs and outputs filled in."""
    body, _ = _block(graph.body, frozenset(), graph.locals)
    return graph.with_body(body)


def _block(block: Block, live_out: frozenset[str], locals_: frozenset[str]) -> tuple[Block, frozenset[str]]:
    live = live_out
    new_nodes: list[Node] = []
    for node in reversed(block):
        if isinstance(node, Return):
            reads, _ = reads_writes(node, locals_)
            live = frozenset(reads)
            new_nodes.append(node)
        elif isinstance(node, Cond):
            then, live_then = _block(node.then, live, locals_)
            orelse, live_else = _block(node.orelse, live, locals_)
            if not then and not orelse:
                continue  # nothing depends on the test any more
            reads, _ = reads_writes(node, locals_)
            live = live_then | live_else | reads
            new_nodes.append(replace(node, then=then, orelse=orelse))
        elif isinstance(node, SubDNN):
            statements = _live_statements(node.statements, live, locals_)
            if not statements:
                continue
            node = replace(node, statements=statements)
            reads, writes = reads_writes(node, locals_)
            node = replace(node, inputs=tuple(sorted(reads)), outputs=tuple(sorted(writes & live)))
            live = (live - writes) | reads
            new_nodes.append(node)
        else:
            reads, writes = reads_writes(node, locals_)
            live = (live - writes) | reads
            new_nodes.append(node)
    return tuple(reversed(new_nodes)), live


def _live_statements(statements, live: frozenset[str], locals_: frozenset[str]) -> tuple:
    """Tensor statements whose results are used (tensor code has no side effects)."""
    kept = []
    for stmt in reversed(statements):
        reads, writes = _statement_reads_writes(stmt, locals_)
        if writes and not writes & live:
            continue
        kept.append(stmt)
        live = (live - writes) | reads
    return tuple(reversed(kept))


def live_after_conditions(block: Block, locals_: frozenset[str]) -> dict[int, frozenset[str]]:
    """For each Cond (by ``id``), the variables live after it: states that agree
    on these may be merged there (what differs is never read again)."""
    found: dict[int, frozenset[str]] = {}
    _live_in(block, frozenset(), locals_, found)
    return found


def _live_in(block: Block, live: frozenset[str], locals_: frozenset[str], found: dict[int, frozenset[str]]):
    for node in reversed(block):
        if isinstance(node, Cond):
            found[id(node)] = live
            then = _live_in(node.then, live, locals_, found)
            orelse = _live_in(node.orelse, live, locals_, found)
            live = then | orelse | reads_writes(node, locals_)[0]
        elif isinstance(node, Return):
            live = frozenset(reads_writes(node, locals_)[0])
        else:
            reads, writes = reads_writes(node, locals_)
            live = (live - writes) | reads
    return live


def live_after_ifs(stmts: list[cst.BaseStatement], locals_: frozenset[str]) -> dict[int, frozenset[str]]:
    """``live_after_conditions`` on the rewritten source, before it is a graph."""
    found: dict[int, frozenset[str]] = {}
    _source_live_in(stmts, frozenset(), locals_, found)
    return found


def _source_live_in(stmts, live: frozenset[str], locals_: frozenset[str], found: dict[int, frozenset[str]]):
    for stmt in reversed(stmts):
        if isinstance(stmt, cst.If):
            found[id(stmt)] = live
            then = _source_live_in(list(stmt.body.body), live, locals_, found)
            orelse = _source_live_in(else_body(stmt), live, locals_, found)
            live = then | orelse | (read_names(stmt.test) & locals_)
        elif isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Return):
            live = frozenset(read_names(stmt) & locals_)
        else:
            reads, writes = _statement_reads_writes(stmt, locals_)
            live = (live - writes) | reads
    return live
