"""Turn ``break``, ``continue`` and early ``return`` into nested ``if``/``else``.

Both helpers push "the rest of the block" into the branch that falls through,
so afterwards no statement follows a branch that may leave the block. Where
that would copy the rest into more than one branch (an exit nested in an
``if`` that itself falls through: ``if a: [if b: return x]``), a flag guards one
copy instead, so the code grows linearly with the number of exits, not
exponentially. Shared by the unroll pass (loop exits) and the structure pass
(returns of inlined bodies).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import libcst as cst
from dycl.rewriter.flow import else_body
from dycl.rewriter.locations import comment_of, set_location
from dycl.rewriter.walk import bound_names, small_statement_targets, statements_contain

Block = list[cst.BaseStatement]

EXITS = (cst.Return, cst.Raise, cst.Break, cst.Continue)


def make_block(stmts: Sequence[cst.BaseStatement]) -> cst.IndentedBlock:
    return cst.IndentedBlock(body=list(stmts) or [cst.SimpleStatementLine([cst.Pass()])])


def rebuild_if(stmt: cst.If, body: Block, orelse: Block) -> cst.If:
    """``stmt`` with new branches (an ``elif`` becomes ``else: if``; an empty else is dropped)."""
    new_else = cst.Else(body=make_block(orelse)) if orelse else None
    return stmt.with_changes(body=stmt.body.with_changes(body=make_block(body).body), orelse=new_else)


def with_inner_blocks(stmt: cst.BaseStatement, block: Callable[[Block], Block]) -> cst.BaseStatement | None:
    """``stmt`` with ``block`` applied to each block it holds (an ``if``'s branches, a loop's
    body and ``else``); None for a statement that holds none of these."""
    if isinstance(stmt, cst.If):
        return rebuild_if(stmt, block(list(stmt.body.body)), block(else_body(stmt)))
    if isinstance(stmt, (cst.For, cst.While)):
        orelse = stmt.orelse.with_changes(body=stmt.orelse.body.with_changes(
            body=block(list(stmt.orelse.body.body)))) if stmt.orelse else None
        return stmt.with_changes(body=stmt.body.with_changes(body=block(list(stmt.body.body))), orelse=orelse)
    return None


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


def _fall_tails(stmts: Sequence[cst.BaseStatement], kind: type | tuple[type, ...]) -> int:
    """How many copies of a continuation nesting would make (paths that fall through)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for stmt in stmts:
        if always_exits([stmt]):
            return 0
        if isinstance(stmt, cst.If) and contains(stmt, kinds, into_loops=False):
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


_RETURNS = (cst.Return, cst.Raise)


def must_define(stmts: Sequence[cst.BaseStatement], defined: frozenset[str]) -> frozenset[str]:
    """The names surely bound after ``stmts`` (loop-free) when ``defined`` are bound
    before: what a path-insensitive "read before assignment" check accepts."""
    for stmt in stmts:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Del):
                    defined = defined - small_statement_targets(small)
                else:
                    defined = defined | small_statement_targets(small)
        elif isinstance(stmt, cst.If):
            branches = [b for b in (list(stmt.body.body), else_body(stmt)) if not always_exits(b)]
            if not branches:
                return defined
            defined = frozenset.intersection(*(must_define(b, defined) for b in branches))
        else:
            defined = defined | frozenset(bound_names(stmt))
    return defined


def nest_after_returns(stmts: Sequence[cst.BaseStatement], fresh: Callable[[str], str],
                       defined: frozenset[str] = frozenset()) -> Block:
    """A loop-free block in which no statement follows an ``if`` that may return.

    The statements after such an ``if`` move into the branch that falls through
    (dead code after a ``return`` or ``raise`` disappears). Where more than one
    branch falls through and the rest is not tiny, the rest of the block becomes
    a single-exit region instead (``_ReturnRegion``): one copy, guarded by a flag.
    ``defined`` are the names bound before ``stmts`` (the parameters).
    """
    out: Block = []
    for i, stmt in enumerate(stmts):
        if _final_small(stmt) is not None:
            prefix, _ = _split_at_exit(stmt)
            return out + [stmt.with_changes(body=list(stmt.body)[: len(prefix[0].body) + 1 if prefix else 1])]
        # an if whose only exits are raises needs no nesting: a raise ends its path, the rest follows
        if isinstance(stmt, cst.If) and contains(stmt, (cst.Return,), into_loops=True):
            rest = list(stmts[i + 1:])
            if _fall_tails([stmt], _RETURNS) <= 1 or _is_small(rest):
                before = must_define(out, defined)
                body = nest_after_returns(list(stmt.body.body) + rest, fresh, before)
                orelse = nest_after_returns(else_body(stmt) + rest, fresh, before)
                return out + [rebuild_if(stmt, body, orelse)]
            return out + _ReturnRegion(fresh).run(list(stmts[i:]), must_define(out, defined))
        out.append(stmt)
    return out


class _ReturnRegion:
    """A block rewritten to leave by its last statement only::

        returned = False; result = None
        <block, each ``return v`` now ``result = v; returned = True``>
        return result

    where the statements after an ``if`` that may have returned on more than one
    path run under ``if not returned:`` (one copy; nested, so what they read
    stays defined on every path the way Python's scoping sees it).

    Assumes: a loop-free block that ends the function (as inlined bodies do).
    Guarantees: the only ``return`` is the last statement, so a caller can
    write the result once; ``returned`` is only ever assigned ``True``/``False``
    (``hcfg.state.PathFlags`` relies on that to follow only feasible paths); and
    a name read after such an ``if`` is bound on every path that reaches the
    read, including the returned ones, where it is set to ``None`` (dead: only
    ``return result`` follows) — the HCFG's definedness check is path-insensitive.
    """

    def __init__(self, fresh: Callable[[str], str]) -> None:
        self.flag = fresh("returned")
        self.result = fresh("result")

    def run(self, stmts: Block, defined: frozenset[str]) -> Block:
        like = stmts[0]
        prologue = [_line(_assign(self.flag, False), like),
                    _line(cst.Assign([cst.AssignTarget(cst.Name(self.result))], cst.Name("None")), like)]
        body = self.block(stmts, defined | {self.flag, self.result}, None)
        epilogue = [_line(cst.Return(cst.Name(self.result)), stmts[-1])]
        return prologue + body + ([] if always_exits(body) else epilogue)

    def block(self, stmts: Sequence[cst.BaseStatement], defined: frozenset[str],
              enclosing: tuple[frozenset[str], frozenset[str]] | None) -> Block:
        """``stmts`` with returns turned into result writes. ``enclosing`` is (the names
        the outermost flag-guarded ``if`` around ``stmts`` binds, the names bound
        before it): an exit in it must bind those the guarded code may read."""
        out: Block = []
        for i, stmt in enumerate(stmts):
            if _final_small(stmt) is not None:
                prefix, exit_ = _split_at_exit(stmt)
                if not isinstance(exit_, cst.Return):
                    return out + [stmt.with_changes(body=[*(prefix[0].body if prefix else []), exit_])]
                return out + prefix + self.exit(exit_, stmt, must_define(out + prefix, defined), enclosing)
            if isinstance(stmt, cst.If) and contains(stmt, (cst.Return,), into_loops=True):  # (see above)
                after = list(stmts[i + 1:])
                before = must_define(out, defined)
                if _fall_tails([stmt], _RETURNS) <= 1 or _is_small(after):
                    body = self.block(list(stmt.body.body) + after, before, enclosing)
                    orelse = self.block(else_body(stmt) + after, before, enclosing)
                    return out + [rebuild_if(stmt, body, orelse)]
                inner = enclosing or (frozenset(bound_names(stmt)), before)
                guarded = rebuild_if(stmt, self.block(list(stmt.body.body), before, inner),
                                     self.block(else_body(stmt), before, inner))
                if not after:
                    return out + [guarded]
                remaining = self.block(after, must_define([stmt], before), enclosing)
                test = cst.UnaryOperation(cst.Not(), cst.Name(self.flag))
                guard = set_location(cst.If(test=test, body=make_block(remaining)), comment_of(after[0]))
                return out + [guarded, guard]
            out.append(stmt)
        return out

    def exit(self, exit_: cst.Return, like: cst.BaseStatement, bound: frozenset[str],
             enclosing: tuple[frozenset[str], frozenset[str]] | None) -> Block:
        value = exit_.value if exit_.value is not None else cst.Name("None")
        lines = [_line(cst.Assign([cst.AssignTarget(cst.Name(self.result))], value), like),
                 _line(_assign(self.flag, True), like)]
        if enclosing is not None:
            binds, before = enclosing
            for name in sorted(binds - before - bound):
                lines.append(_line(cst.Assign([cst.AssignTarget(cst.Name(name))], cst.Name("None")), like))
        return lines
