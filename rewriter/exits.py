"""Turn ``break``, ``continue`` and early ``return`` into nested ``if``/``else``.

Both helpers push "the rest of the block" into every branch that falls
through, so afterwards no statement follows a branch that may leave the block.
Shared by the unroll pass (loop exits) and the structure pass (returns).
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from rewriter.flow import else_body
from rewriter.walk import statements_contain

Block = list[cst.BaseStatement]

EXITS = (cst.Return, cst.Raise, cst.Break, cst.Continue)


def make_block(stmts: Sequence[cst.BaseStatement]) -> cst.IndentedBlock:
    return cst.IndentedBlock(body=list(stmts) or [cst.SimpleStatementLine([cst.Pass()])])


def rebuild_if(stmt: cst.If, body: Block, orelse: Block) -> cst.If:
    """``stmt`` with new branches (an ``elif`` becomes ``else: if``; an empty else is dropped)."""
    new_else = cst.Else(body=make_block(orelse)) if orelse else None
    return stmt.with_changes(body=stmt.body.with_changes(body=make_block(body).body), orelse=new_else)


def _final_small(stmt: cst.BaseStatement) -> cst.BaseSmallStatement | None:
    if isinstance(stmt, cst.SimpleStatementLine):
        for small in stmt.body:
            if isinstance(small, EXITS):
                return small
    return None


def always_exits(stmts: Sequence[cst.BaseStatement]) -> bool:
    """Whether every path through ``stmts`` ends in return/raise/break/continue."""
    for stmt in stmts:
        if _final_small(stmt) is not None:
            return True
        if isinstance(stmt, cst.If) and always_exits(stmt.body.body) and always_exits(else_body(stmt)):
            return True
        if isinstance(stmt, cst.With) and always_exits(stmt.body.body):
            return True
    return False


def contains(stmt: cst.CSTNode, kinds: tuple[type, ...], into_loops: bool) -> bool:
    """Whether ``stmt`` holds a (small) statement of type ``kinds``."""
    return statements_contain([stmt], kinds, into_loops)


def _split_at_exit(stmt: cst.SimpleStatementLine) -> tuple[list[cst.BaseStatement], cst.BaseSmallStatement]:
    """The small statements before the first exit (as a line, if any), and the exit."""
    before = []
    for small in stmt.body:
        if isinstance(small, EXITS):
            prefix = [stmt.with_changes(body=before)] if before else []
            return prefix, small
        before.append(small)
    raise AssertionError("no exit in line")


def thread_loop_exits(stmts: Sequence[cst.BaseStatement], after: Block, next_iteration: Block,
                      unsupported) -> Block:
    """One unrolled loop iteration without ``break``/``continue``.

    ``after`` runs when the iteration falls off its end, ``next_iteration`` at a
    ``continue``; a ``break`` ends the path (control goes past the unrolled
    loop). ``unsupported(stmt)`` is raised for a loop exit inside ``with``.
    """
    out: Block = []
    for i, stmt in enumerate(stmts):
        exit_ = _final_small(stmt)
        if exit_ is not None:
            prefix, exit_ = _split_at_exit(stmt)
            if isinstance(exit_, cst.Break):
                return out + prefix
            if isinstance(exit_, cst.Continue):
                return out + prefix + list(next_iteration)
            return out + [stmt]
        if isinstance(stmt, cst.If) and contains(stmt, (cst.Break, cst.Continue), into_loops=False):
            rest = list(stmts[i + 1:])
            body = thread_loop_exits(list(stmt.body.body) + rest, after, next_iteration, unsupported)
            orelse = thread_loop_exits(else_body(stmt) + rest, after, next_iteration, unsupported)
            return out + [rebuild_if(stmt, body, orelse)]
        if isinstance(stmt, cst.With) and contains(stmt, (cst.Break, cst.Continue), into_loops=False):
            raise unsupported(stmt)
        out.append(stmt)
    return out if always_exits(out) else out + list(after)


def nest_after_returns(stmts: Sequence[cst.BaseStatement]) -> Block:
    """A loop-free block in which no statement follows an ``if`` that may return.

    The statements after such an ``if`` move into each of its branches (where
    they are dropped again if the branch always returns); dead code after a
    ``return`` or ``raise`` disappears.
    """
    out: Block = []
    for i, stmt in enumerate(stmts):
        if _final_small(stmt) is not None:
            prefix, _ = _split_at_exit(stmt)
            return out + [stmt.with_changes(body=list(stmt.body)[: len(prefix[0].body) + 1 if prefix else 1])]
        if isinstance(stmt, cst.If) and contains(stmt, (cst.Return, cst.Raise), into_loops=True):
            rest = list(stmts[i + 1:])
            body = nest_after_returns(list(stmt.body.body) + rest)
            orelse = nest_after_returns(else_body(stmt) + rest)
            return out + [rebuild_if(stmt, body, orelse)]
        out.append(stmt)
    return out
