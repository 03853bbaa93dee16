"""Pass: make the loop-free function a tree of ``if`` statements."""

from __future__ import annotations

import libcst as cst

from rewriter.exits import Block, nest_after_returns


class ElifToElse(cst.CSTTransformer):
    """Rewrites ``elif`` as ``else:`` + ``if``.

    Guarantees: every ``If.orelse`` is None or an ``Else`` block.
    """

    def leave_If(self, original: cst.If, updated: cst.If) -> cst.If:
        if isinstance(updated.orelse, cst.If):
            return updated.with_changes(orelse=cst.Else(body=cst.IndentedBlock(body=[updated.orelse])))
        return updated


def _is_empty(block: cst.BaseSuite | None) -> bool:
    if block is None:
        return True
    return all(isinstance(stmt, cst.SimpleStatementLine) and all(isinstance(s, cst.Pass) for s in stmt.body)
               for stmt in block.body)


class DropEmptyIfs(cst.CSTTransformer):
    """Removes an ``if`` whose branches do nothing (left by a ``break`` in the last iteration).

    Guarantees: every remaining ``if`` has a statement other than ``pass`` in a branch.
    """

    def leave_If(self, original: cst.If, updated: cst.If):
        if _is_empty(updated.body) and (updated.orelse is None or _is_empty(updated.orelse.body)):
            return cst.RemoveFromParent()
        return updated

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock):
        if not updated.body:
            return updated.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])
        return updated


class Structure:
    """Rewrites ``elif`` chains and early returns into nested ``if``/``else``.

    Assumes: loop-free code (no ``for``/``while``/``break``/``continue``).
    Guarantees: no ``elif``; no statement follows an ``if`` that contains a
    ``return`` or ``raise`` (the statements that followed it now end each of
    its branches that could fall through); no unreachable statement follows a
    ``return`` or ``raise``; no ``if`` with two empty branches.
    """

    def run(self, body: Block) -> Block:
        module = cst.Module(body=body).visit(ElifToElse())
        nested = cst.Module(body=nest_after_returns(list(module.body)))
        return list(nested.visit(DropEmptyIfs()).body)
