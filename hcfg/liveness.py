"""Liveness over the HCFG: which variables each sub-DNN takes and gives back.

Terms (numba ``controlflow.py`` style; every set holds names of ``graph.locals``):

- *reads* / *writes* of a node (``reads_writes``): the variables it reads before
  assigning them, and the ones it assigns; a condition reads its test; a return
  reads its value; ``lst.append(x)`` reads ``lst`` and writes nothing.
- A tensor statement of a sub-DNN is *dead* when it assigns something and
  nothing it assigns is live after it: tensor code has no side effects, so it
  can go. A sub-DNN whose statements are all dead is dead; a condition whose
  branches hold only dead nodes is dead. Host operations and returns never are.
- A variable is *live* at a point if some path from there reads it, in a node
  that is not dead, before assigning it (strong liveness: a read by dead code
  does not count).
- A sub-DNN's *ports*: its inputs are the variables its live statements read
  before assigning; its outputs are those they assign that are live after it.

``Liveness`` is the analysis of one graph, computed on demand and cached by
``HCFG.liveness`` (a new graph is a new object, so a pass never sees a stale
analysis). ``annotate`` is the graph pass that applies it: dead code leaves, and
every sub-DNN's ``inputs``/``outputs`` are its ports (``hcfg.verify`` checks
that they stay so after every pass). What each statement reads and writes is
remembered for a whole compilation (``HCFG.effects``, shared by the graphs a
pass derives): passes keep statement objects, so each is walked once.

Assumes: ``locals`` holds every name the function assigns. Liveness is about
names: an object changed in place (``lst.append(x)``) stays live through the
later reads of its name; two names for one object are ``hcfg.aliasing``'s
concern, not this module's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import libcst as cst
from dycl.hcfg.aliasing import updated_in_place
from dycl.hcfg.nodes import Block, Cond, HostOp, Node, Return, SubDNN
from dycl.rewriter.flow import else_body
from dycl.rewriter.walk import bound_names, read_names

Names = frozenset[str]


# statement id -> (the statement, kept so that its id is not reused; names it reads; names it writes)
EffectsMemo = dict[int, tuple[cst.CSTNode, frozenset[str], frozenset[str]]]


def _effects(stmt: cst.CSTNode) -> tuple[frozenset[str], frozenset[str]]:
    reads = read_names(stmt)
    small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else stmt
    if isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name):
        reads.add(small.target.value)
    # out.index_add_(0, i, v) (also as `t = out.index_add_(...)`) updates out: it is read and written
    updated = frozenset(updated_in_place(stmt))
    if isinstance(small, cst.Expr):  # lst.append(x) updates lst: it is read and written
        return frozenset(reads), updated
    return frozenset(reads), frozenset(bound_names(stmt)) | updated


def statement_reads_writes(stmt: cst.CSTNode, locals_: frozenset[str], memo: EffectsMemo | None = None
                           ) -> tuple[set[str], set[str]]:
    """What one statement reads and writes (see the module's terms). ``memo`` (``HCFG.effects``)
    remembers each statement's names: passes keep statement objects, so one compilation
    walks each statement once, however many graphs hold it."""
    if memo is None:
        reads, writes = _effects(stmt)
    else:
        known = memo.get(id(stmt))
        if known is None:
            known = memo[id(stmt)] = (stmt, *_effects(stmt))
        reads, writes = known[1], known[2]
    return set(reads & locals_), set(writes & locals_)


def statements_reads_writes(statements: Iterable[cst.CSTNode], locals_: frozenset[str],
                            memo: EffectsMemo | None = None) -> tuple[set[str], set[str]]:
    """What a run of statements reads before assigning, and what it assigns."""
    reads: set[str] = set()
    writes: set[str] = set()
    for stmt in statements:
        r, w = statement_reads_writes(stmt, locals_, memo)
        reads |= r - writes
        writes |= w
    return reads, writes


def reads_writes(node: Node, locals_: frozenset[str], memo: EffectsMemo | None = None) -> tuple[set[str], set[str]]:
    """Variables ``node`` reads before assigning them, and variables it assigns
    (for a Cond: its test only)."""
    if isinstance(node, SubDNN):
        return statements_reads_writes(node.statements, locals_, memo)
    if isinstance(node, HostOp):
        return statement_reads_writes(node.statement, locals_, memo)
    if isinstance(node, Cond):
        return read_names(node.test) & locals_, set()
    return read_names(node.value) & locals_, set()


@dataclass
class Liveness:
    """The liveness of one body, by node identity (``id(node)``; the graph keeps
    its nodes alive, so the ids are stable while it exists).

    ``before``/``after``: the variables live just before / after each node;
    ``kept``: each live sub-DNN's live statements; ``dead``: the dead nodes;
    ``memo``: what each statement reads and writes (``statement_reads_writes``)."""

    locals: frozenset[str]
    memo: EffectsMemo = field(default_factory=dict)
    before: dict[int, Names] = field(default_factory=dict)
    after: dict[int, Names] = field(default_factory=dict)
    kept: dict[int, tuple[cst.SimpleStatementLine, ...]] = field(default_factory=dict)
    dead: set[int] = field(default_factory=set)
    _ports: dict[int, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)

    @classmethod
    def of(cls, body: Block, locals_: frozenset[str], memo: EffectsMemo | None = None) -> Liveness:
        analysis = cls(frozenset(locals_), {} if memo is None else memo)
        analysis._block(body, frozenset())
        return analysis

    def reads_writes(self, node: Node) -> tuple[set[str], set[str]]:
        """``reads_writes(node)``, from the memo."""
        return reads_writes(node, self.locals, self.memo)

    def is_dead(self, node: Node) -> bool:
        return id(node) in self.dead

    def live_after(self, node: Node) -> Names:
        return self.after[id(node)]

    def live_before(self, node: Node) -> Names:
        return self.before[id(node)]

    def ports(self, sub: SubDNN) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(inputs, outputs) of a live sub-DNN, each sorted."""
        return self._ports[id(sub)]

    def _block(self, block: Block, live: Names) -> Names:
        for node in reversed(block):
            self.after[id(node)] = live
            live = self._node(node, live)
            self.before[id(node)] = live
        return live

    def _node(self, node: Node, live: Names) -> Names:
        if isinstance(node, Return):
            return frozenset(self.reads_writes(node)[0])
        if isinstance(node, Cond):
            live_then = self._block(node.then, live)
            live_else = self._block(node.orelse, live)
            if all(id(n) in self.dead for n in (*node.then, *node.orelse)):
                self.dead.add(id(node))  # nothing depends on the test any more
                return live
            return live_then | live_else | self.reads_writes(node)[0]
        if isinstance(node, SubDNN):
            kept, live_in = self._statements(node.statements, live)
            if not kept:
                self.dead.add(id(node))
            else:
                self.kept[id(node)] = kept
                reads, writes = statements_reads_writes(kept, self.locals, self.memo)
                self._ports[id(node)] = tuple(sorted(reads)), tuple(sorted(writes & live))
            return live_in
        reads, writes = self.reads_writes(node)
        return (live - writes) | reads

    def _statements(self, statements: tuple[cst.SimpleStatementLine, ...], live: Names
                    ) -> tuple[tuple[cst.SimpleStatementLine, ...], Names]:
        kept = []
        for stmt in reversed(statements):
            reads, writes = statement_reads_writes(stmt, self.locals, self.memo)
            if writes and not writes & live:
                continue
            kept.append(stmt)
            live = (live - writes) | reads
        return tuple(reversed(kept)), live


def live_after_conditions(block: Block, locals_: frozenset[str]) -> dict[int, frozenset[str]]:
    """For each node (by ``id``; used for the conditions), the variables live after it:
    states that agree on these may be merged there (what differs is never read again).
    On a whole graph, ``graph.liveness.after`` is the same, computed once."""
    return Liveness.of(block, locals_).after


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
            reads, writes = statement_reads_writes(stmt, locals_)
            live = (live - writes) | reads
    return live


__all__ = ["Liveness", "live_after_conditions", "live_after_ifs", "reads_writes",
           "statement_reads_writes", "statements_reads_writes", "EffectsMemo"]
