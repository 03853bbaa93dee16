"""Check the guarantees the rewriter makes about its output."""

from __future__ import annotations

import libcst as cst
from dycl.rewriter.deferred_refusals import refusal_in
from dycl.rewriter.exits import Block
from dycl.rewriter.flow import Env, Exits
from dycl.rewriter.passes import FlowWalker, FunctionUnit
from dycl.rewriter.walk import same_program

# CPython's tokenizer refuses more than 100 indentation levels.
MAX_NESTING = 90


class RewriteInvariantError(AssertionError):
    """The rewriter produced code that breaks its own guarantees (a dycl bug)."""


def verify_printed(definition: cst.FunctionDef, source: str) -> None:
    """Assert: ``source`` (``definition`` printed) reads back as ``definition`` -- what the
    HCFG builder analyses is what runs. Checked in debug/test mode (``rewriter.checking``)."""
    printed = cst.parse_module(source).body[0]
    if same_program(definition, printed):
        return
    built, read = list(definition.body.body), list(printed.body.body) if isinstance(printed, cst.FunctionDef) else []
    for stmt, again in zip(built, read):
        if not same_program(stmt, again):
            text = cst.Module([stmt]).code.strip()[:300]
            raise RewriteInvariantError(f"the rewritten statement `{text}` reads back as another tree")
    raise RewriteInvariantError("the rewritten function reads back as another tree")


def verify(unit: FunctionUnit, body: Block) -> None:
    """Assert: no loop, ``break`` or ``continue``; no ``if`` whose test is static;
    nesting shallow enough for Python to compile, no import and no deferred refusal left
    (else ``UnsupportedError``)."""
    _Verifier(unit).run(body)


class _Verifier(FlowWalker):
    """Walks the rewritten body under the static facts, raising at the first broken guarantee."""

    name = "verify"
    description = "check the guarantees of the rewritten body"

    def __init__(self, unit: FunctionUnit) -> None:
        super().__init__(unit)
        self.depth = 1

    def block(self, stmts: Block, env: Env | None) -> tuple[Block, Exits]:
        if self.depth > MAX_NESTING:
            raise self.ctx.error(f"control flow nested more than {MAX_NESTING} levels deep after unrolling",
                                 stmts[0] if stmts else None,
                                 "reduce the number of early exits or loop iterations that can break")
        return super().block(stmts, env)

    def statement(self, stmt: cst.BaseStatement, env: Env) -> tuple[Block, Exits]:
        if isinstance(stmt, (cst.For, cst.While, cst.With, cst.Try)):
            raise RewriteInvariantError(f"{type(stmt).__name__} left in rewritten code")
        if isinstance(stmt, cst.SimpleStatementLine) and any(
            isinstance(s, (cst.Break, cst.Continue)) for s in stmt.body
        ):
            raise RewriteInvariantError("break/continue left in rewritten code")
        refused = refusal_in(stmt, lambda node: self.flow.evaluate(node, env))
        if refused is not None:  # a statement refused where reached (``rewriter.deferred_refusals``)
            raise refused
        if isinstance(stmt, cst.SimpleStatementLine) and any(
            isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
        ):  # one that would run a module's code (``rewriter.local_imports``), still reached
            raise self.ctx.error("an import statement inside forward() (of a module not imported yet)", stmt,
                                 "import at module level")
        return super().statement(stmt, env)

    def branch(self, stmt: cst.If, env: Env) -> tuple[Block, Exits]:
        if self.flow.evaluate(stmt.test, env) is not None:
            test = cst.Module([]).code_for_node(stmt.test)
            raise RewriteInvariantError(f"if with a static test left: {test}")
        self.depth += 1
        try:
            return super().branch(stmt, env)
        finally:
            self.depth -= 1
