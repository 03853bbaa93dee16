"""Pass: make the loop-free function a tree of ``if`` statements."""

from __future__ import annotations

import libcst as cst
from dycl.rewriter.exits import Block, always_exits, nest_after_returns, rebuild_if
from dycl.rewriter.flow import else_body
from dycl.rewriter.passes import FunctionUnit


def _is_empty(stmts: Block) -> bool:
    return all(isinstance(stmt, cst.SimpleStatementLine) and all(isinstance(s, cst.Pass) for s in stmt.body)
               for stmt in stmts)


class Structure:
    """Rewrites ``elif`` chains as nested ``if``/``else``, removes dead code and
    empty ``if``s; in an inlined body (``nest_returns``) also moves the statements after an
    ``if`` that may return into its branches.

    Assumes: loop-free code (no ``for``/``while``/``break``/``continue``).
    Guarantees: no ``elif``; no statement after a ``return``/``raise`` or after
    an ``if`` all of whose branches return; no ``if`` with two empty branches;
    ``pass`` only where a block would otherwise be empty.
    With ``nest_returns`` (used for bodies that are inlined), additionally no
    statement follows an ``if`` that contains a ``return``: every ``return``
    ends its path (where a flag keeps the size linear, the block's one
    ``return`` is its last statement, see ``rewriter.exits``). The top-level function keeps guard clauses
    (``if c: return a`` followed by the rest) — the same control flow graph,
    without one indentation level per early exit, which CPython caps at 100.
    """

    name = "structure"
    description = "elif and early returns become nested if/else"

    def __init__(self, unit: FunctionUnit) -> None:
        self.nest_returns = unit.inlined
        self.fresh = unit.ctx.namespace.fresh
        self.parameters = unit.parameters

    def run(self, body: Block) -> Block:
        if self.nest_returns:
            body = nest_after_returns(body, self.fresh, self.parameters)
        return self.block(body)

    def block(self, stmts: Block) -> Block:
        out: Block = []
        for stmt in stmts:
            if isinstance(stmt, cst.If):
                body = self.block(list(stmt.body.body))
                orelse = self.block(else_body(stmt))
                if _is_empty(body) and _is_empty(orelse):
                    continue
                stmt = rebuild_if(stmt, body, [] if _is_empty(orelse) else orelse)
            out.append(stmt)
            if always_exits([stmt]):
                break
        real = [stmt for stmt in out if not _is_empty([stmt])]
        return real if real else out[:1]
