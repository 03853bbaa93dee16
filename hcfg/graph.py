"""The heterogeneous control flow graph (paper §5.3), kept in structured form.

The rewritten function is a tree of ``if`` statements over straight-line code.
Its HCFG has four kinds of nodes:

- ``SubDNN``: a maximal run of tensor statements — compiled by a backend;
- ``HostOp``: one statement of Python bookkeeping (counters, list appends,
  tuple packing, ``.item()`` of a sub-DNN output) — kept in the host;
- ``Cond``: one ``if`` whose test is a host expression over Python values and
  sub-DNN outputs (the tensor part of the test was moved into the sub-DNN
  before it);
- ``Return``: the end of a path.

A ``Block`` is a sequence of nodes run in order; a ``Cond`` holds two blocks and
control continues after it (a join) unless both end in ``Return``. Nodes are
frozen, so a graph pass returns a new ``HCFG``; analyses are lazily computed
properties of one graph (``HCFG.liveness``), and ``HCFG.check()`` verifies the
invariants listed in ``hcfg.verify``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst
from dycl.rewriter.locations import comment_of

if TYPE_CHECKING:
    from dycl.hcfg.liveness import Liveness


def source_of(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node).rstrip("\n")


def where(stmt: object) -> str:
    """The user's ``file.py:line`` of a statement, from its location comment ("" if none)."""
    comment = comment_of(stmt) if isinstance(stmt, cst.CSTNode) else None
    return comment.value.lstrip("#").strip() if comment is not None else ""


@dataclass(frozen=True)
class SubDNN:
    """Straight-line tensor statements; ``inputs``/``outputs`` come from liveness."""

    index: int
    statements: tuple[cst.SimpleStatementLine, ...]
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"subdnn_{self.index}"


@dataclass(frozen=True)
class HostOp:
    statement: cst.SimpleStatementLine


@dataclass(frozen=True)
class Cond:
    index: int
    statement: cst.If
    test: cst.BaseExpression
    then: tuple[Node, ...]
    orelse: tuple[Node, ...]


@dataclass(frozen=True)
class Return:
    statement: cst.SimpleStatementLine
    value: cst.BaseExpression


Node = SubDNN | HostOp | Cond | Return
Block = tuple[Node, ...]


def always_returns(block: Block) -> bool:
    """Whether every path through ``block`` ends in a ``Return`` or a host ``raise``."""
    for node in block:
        if isinstance(node, Return) or raises(node):
            return True
        if isinstance(node, Cond) and always_returns(node.then) and always_returns(node.orelse):
            return True
    return False


def raises(node: Node) -> bool:
    """A host ``raise``: the paths that reach it end there, as in eager mode."""
    return isinstance(node, HostOp) and isinstance(node.statement.body[0], cst.Raise)


def walk(block: Block) -> Iterator[Node]:
    """Every node, in program order (a Cond before its branches)."""
    for node in block:
        yield node
        if isinstance(node, Cond):
            yield from walk(node.then)
            yield from walk(node.orelse)


@dataclass(frozen=True)
class HCFG:
    """The graph of one rewritten function: ``body`` and its parameters."""

    name: str
    parameters: tuple[str, ...]
    body: Block
    locals: frozenset[str] = field(default_factory=frozenset)
    # what each statement reads and writes, shared by every graph a pass makes from this one
    # (``hcfg.liveness.statement_reads_writes``)
    effects: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def sub_dnns(self) -> list[SubDNN]:
        return [n for n in walk(self.body) if isinstance(n, SubDNN)]

    @property
    def conditions(self) -> list[Cond]:
        return [n for n in walk(self.body) if isinstance(n, Cond)]

    def with_body(self, body: Block) -> HCFG:
        return replace(self, body=body)

    @cached_property
    def liveness(self) -> Liveness:
        """Liveness of the body (``hcfg.liveness``), computed once per graph: every
        pass returns a new graph, so the analysis is never stale."""
        from dycl.hcfg.liveness import Liveness  # the analysis imports the graph's node types

        return Liveness.of(self.body, self.locals, self.effects)

    def check(self, after: str | None = None) -> None:
        """Raise ``HCFGInvariantError`` naming the node and the invariant if the graph
        breaks one (the invariants are listed in ``hcfg.verify``); ``after`` names the
        pass that made the graph, for the message."""
        from dycl.hcfg.verify import verify  # the verifier imports liveness, which imports this module

        verify(self, after)

    def to_dot(self) -> str:
        """Graphviz source of the bare graph (``hcfg.draw.outline_dot``; ``hcfg.draw.draw``
        makes the full picture)."""
        from dycl.hcfg.draw import outline_dot  # drawing imports the graph, not the other way

        return outline_dot(self)
