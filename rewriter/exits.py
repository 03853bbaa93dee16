"""Turn ``break``, ``continue`` and early ``return`` into nested ``if``/``else``.

Both helpers push "the rest of the block" into every branch that falls
through, so afterwards no statement follows a branch that may leave the block.
Shared by the unroll pass (loop exits) and the structure pass (returns).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import libcst as cst

from rewriter.flow import else_body
from rewriter.locations import comment_of, set_location
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


def _line(small: cst.BaseSmallStatement, like: cst.BaseStatement) -> cst.SimpleStatementLine:
    return set_location(cst.SimpleStatementLine([small]), comment_of(like))


def _assign(name: str, value: bool) -> cst.Assign:
    return cst.Assign([cst.AssignTarget(cst.Name(name))], cst.Name(str(value)))


def _is_small(stmts: Sequence[cst.BaseStatement]) -> bool:
    return len(stmts) <= 2 and all(isinstance(s, cst.SimpleStatementLine) for s in stmts)


def _fall_tails(stmts: Sequence[cst.BaseStatement], kind: type) -> int:
    """How many copies of a continuation nesting would make (paths that fall through)."""
    for stmt in stmts:
        if always_exits([stmt]):
            return 0
        if isinstance(stmt, cst.If) and contains(stmt, (kind,), into_loops=False):
            return _fall_tails(stmt.body.body, kind) + _fall_tails(else_body(stmt), kind)
    return 1


def run_unless_exited(stmts: Sequence[cst.BaseStatement], rest: Block, kind: type,
                      new_flag: Callable[[], str], on_exit: Block = ()) -> Block:
    """``stmts`` followed by ``rest``, where a ``kind`` statement (``break`` or
    ``continue``) ends its path and skips ``rest``.

    Where the code after an ``if`` holding such an exit would be copied into more
    than one branch (and is not tiny), a flag is used instead of copies:
    ``exited = False`` ... ``exited = True`` at the exit ... ``if not exited: <rest>``
    — so the code size stays linear. ``on_exit`` runs at each exit (outer flags).
    """
    out: Block = []
    for i, stmt in enumerate(stmts):
        if _final_small(stmt) is not None:
            prefix, exit_ = _split_at_exit(stmt)
            if isinstance(exit_, kind):
                return out + prefix + list(on_exit)
            return out + [stmt]
        if isinstance(stmt, cst.If) and contains(stmt, (kind,), into_loops=False):
            after = list(stmts[i + 1:])
            if _fall_tails([stmt], kind) <= 1 or _is_small(after + list(rest)):
                body = run_unless_exited(list(stmt.body.body) + after, rest, kind, new_flag, on_exit)
                orelse = run_unless_exited(else_body(stmt) + after, rest, kind, new_flag, on_exit)
                return out + [rebuild_if(stmt, body, orelse)]
            flag = new_flag()
            raised = [*on_exit, _line(_assign(flag, True), stmt)]
            inner = rebuild_if(stmt, run_unless_exited(list(stmt.body.body), [], kind, new_flag, raised),
                               run_unless_exited(else_body(stmt), [], kind, new_flag, raised))
            remaining = run_unless_exited(after, rest, kind, new_flag, on_exit)
            guard = cst.If(test=cst.UnaryOperation(cst.Not(), cst.Name(flag)), body=make_block(remaining))
            return out + [_line(_assign(flag, False), stmt), inner, set_location(guard, comment_of(stmt))]
        out.append(stmt)
    return out if always_exits(out) else out + list(rest)


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
