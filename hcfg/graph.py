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
frozen; analyses live on ``HCFG``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from dycl.hcfg.liveness import Liveness


def source_of(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node).rstrip("\n")


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
    for node in block:
        if isinstance(node, Return):
            return True
        if isinstance(node, Cond) and always_returns(node.then) and always_returns(node.orelse):
            return True
    return False


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

        return Liveness.of(self.body, self.locals)

    def check(self, after: str | None = None) -> None:
        """Raise ``HCFGInvariantError`` naming the node and the invariant if the graph
        breaks one (the invariants are listed in ``hcfg.verify``); ``after`` names the
        pass that made the graph, for the message."""
        from dycl.hcfg.verify import verify  # the verifier imports liveness, which imports this module

        verify(self, after)

    def to_dot(self) -> str:
        """Graphviz source: conditions are diamonds, sub-DNNs boxes (labelled with
        their statements' first lines), host ops plain text, returns ovals."""
        lines = ["digraph hcfg {", '  node [fontname="monospace", fontsize=10];',
                 '  entry [shape=point];']
        counter = iter(range(1_000_000))
        exits = _dot_block(self.body, ["entry"], lines, counter)
        if exits:
            lines.append('  end [shape=oval, label="return None"];')
            lines += [f"  {e} -> end;" for e in exits]
        lines.append("}")
        return "\n".join(lines) + "\n"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _dot_block(block: Block, preds: list[str], lines: list[str], counter) -> list[str]:
    for node in block:
        if not preds:
            return []
        ident = f"n{next(counter)}"
        if isinstance(node, SubDNN):
            first = [source_of(s.body[0]) for s in node.statements[:3]]
            more = "\\l..." if len(node.statements) > 3 else ""
            label = f"{node.name}\\l" + "\\l".join(_escape(t) for t in first) + more + "\\l"
            lines.append(f'  {ident} [shape=box, style=filled, fillcolor="#dbe8fb", label="{label}"];')
        elif isinstance(node, HostOp):
            lines.append(f'  {ident} [shape=plaintext, label="{_escape(source_of(node.statement.body[0]))}"];')
        elif isinstance(node, Return):
            lines.append(f'  {ident} [shape=oval, label="return {_escape(source_of(node.value))}"];')
        else:
            lines.append(f'  {ident} [shape=diamond, style=filled, fillcolor="#fde9c9", '
                         f'label="if {_escape(source_of(node.statement.test))}"];')
        lines += [f"  {p} -> {ident};" for p in preds]
        if isinstance(node, Return):
            return []
        if isinstance(node, Cond):
            then_exits = _dot_block(node.then, [ident], lines, counter) if node.then else [ident]
            else_exits = _dot_block(node.orelse, [ident], lines, counter) if node.orelse else [ident]
            preds = then_exits + else_exits
        else:
            preds = [ident]
    return preds
