"""Check the guarantees the rewriter makes about its output."""

from __future__ import annotations

import libcst as cst
from dycl.rewriter.context import RewriteContext
from dycl.rewriter.exits import Block
from dycl.rewriter.flow import Env, StaticFlow, else_body

# CPython's tokenizer refuses more than 100 indentation levels.
MAX_NESTING = 90


class RewriteInvariantError(AssertionError):
    """The rewriter produced code that breaks its own guarantees (a dycl bug)."""


def verify(ctx: RewriteContext, flow: StaticFlow, body: Block, env: Env) -> None:
    """Assert: no loop, ``break`` or ``continue``; no ``if`` whose test is static;
    nesting shallow enough for Python to compile."""

    def walk(stmts: Block, env: Env | None, depth: int) -> None:
        if depth > MAX_NESTING:
            raise ctx.error(f"control flow nested more than {MAX_NESTING} levels deep after unrolling",
                            stmts[0] if stmts else None,
                            "reduce the number of early exits or loop iterations that can break")
        for stmt in stmts:
            if env is None:
                return
            if isinstance(stmt, (cst.For, cst.While, cst.With, cst.Try)):
                raise RewriteInvariantError(f"{type(stmt).__name__} left in rewritten code")
            if isinstance(stmt, cst.SimpleStatementLine) and any(
                isinstance(s, (cst.Break, cst.Continue)) for s in stmt.body
            ):
                raise RewriteInvariantError("break/continue left in rewritten code")
            if isinstance(stmt, cst.If):
                if flow.evaluate(stmt.test, env) is not None:
                    test = cst.Module([]).code_for_node(stmt.test)
                    raise RewriteInvariantError(f"if with a static test left: {test}")
                walk(list(stmt.body.body), env.copy(), depth + 1)
                walk(else_body(stmt), env.copy(), depth + 1)
            env = flow.step(stmt, env).fall if env is not None else None

    walk(body, env.copy(), 1)
