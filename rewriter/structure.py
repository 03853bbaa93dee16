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


class Structure:
    """Rewrites ``elif`` chains and early returns into nested ``if``/``else``.

    Assumes: loop-free code (no ``for``/``while``/``break``/``continue``).
    Guarantees: no ``elif``; no statement follows an ``if`` that contains a
    ``return`` or ``raise`` (the statements that followed it now end each of
    its branches that could fall through); no unreachable statement follows a
    ``return`` or ``raise``.
    """

    def run(self, body: Block) -> Block:
        module = cst.Module(body=body).visit(ElifToElse())
        return nest_after_returns(list(module.body))
