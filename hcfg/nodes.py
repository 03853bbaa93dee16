"""The HCFG's node types and the small functions over blocks of them (``hcfg.graph`` holds the
graph itself; see its docstring for what each kind of node is).

Nodes are frozen dataclasses over libcst statements; this module imports nothing else of
``hcfg``, so that the analyses (``hcfg.liveness``, ``hcfg.verify``, ``hcfg.draw``) can be
imported by ``hcfg.graph`` without a cycle."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst
from dycl.rewriter.locations import comment_of


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


__all__ = ["Block", "Cond", "HostOp", "Node", "Return", "SubDNN", "always_returns", "source_of", "walk", "where"]
