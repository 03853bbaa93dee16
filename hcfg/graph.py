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

from dataclasses import dataclass, field, replace
from functools import cached_property

from dycl.hcfg import verify as verifier  # a module: tests count the checks by patching verifier.verify
from dycl.hcfg.draw import outline_dot
from dycl.hcfg.liveness import Liveness
from dycl.hcfg.nodes import Block, Cond, HostOp, Node, Return, SubDNN, always_returns, source_of, walk, where


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
        return Liveness.of(self.body, self.locals, self.effects)

    def check(self, after: str | None = None) -> None:
        """Raise ``HCFGInvariantError`` naming the node and the invariant if the graph
        breaks one (the invariants are listed in ``hcfg.verify``); ``after`` names the
        pass that made the graph, for the message."""
        verifier.verify(self, after)

    def to_dot(self) -> str:
        """Graphviz source of the bare graph (``hcfg.draw.outline_dot``; ``hcfg.draw.draw``
        makes the full picture)."""
        return outline_dot(self)


__all__ = ["HCFG", "Block", "Cond", "HostOp", "Node", "Return", "SubDNN", "always_returns", "source_of", "walk",
           "where"]
