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

import libcst as cst
from dycl.rewriter.locations import comment_of


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

    def check(self) -> None:
        """Structural invariants: unique sub-DNN and condition indices, every variable
        read by a node defined on every path before it, sub-DNN outputs defined
        by their statements. Raises AssertionError naming the node."""
        seen_sub, seen_cond = set(), set()
        for node in walk(self.body):
            if isinstance(node, SubDNN):
                assert node.index not in seen_sub, f"sub-DNN {node.index} appears twice"
                seen_sub.add(node.index)
            if isinstance(node, Cond):
                assert node.index not in seen_cond, f"condition {node.index} appears twice"
                seen_cond.add(node.index)
        _check_defined(self.body, set(self.parameters), self.locals)

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


def _check_defined(block: Block, defined: set[str], locals_: frozenset[str]) -> set[str] | None:
    from dycl.hcfg.liveness import reads_writes

    for node in block:
        if isinstance(node, Cond):
            reads, _ = reads_writes(node, locals_)
            missing = reads - defined
            assert not missing, f"condition {node.index} reads {sorted(missing)} before assignment"
            then = _check_defined(node.then, set(defined), locals_)
            orelse = _check_defined(node.orelse, set(defined), locals_)
            outs = [d for d in (then, orelse) if d is not None]
            if not outs:
                return None
            defined = set.intersection(*outs)
            continue
        reads, writes = reads_writes(node, locals_)
        missing = reads - defined
        where = comment_of(node.statement if not isinstance(node, SubDNN) else node.statements[0])
        assert not missing, f"{type(node).__name__} at {where.value if where else '?'} reads {sorted(missing)} " \
                            "before assignment"
        if isinstance(node, Return):
            return None
        defined |= writes
    return defined
