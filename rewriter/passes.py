"""The shape every rewriter pass has, and the block walker the flow-aware ones share.

A pass is a class with a ``name`` (used in traces and golden tests), a
one-line ``description`` (listed by ``rewriter.pipeline.PIPELINE``), a
constructor taking the ``FunctionUnit`` it rewrites, and ``run(body) ->
body``. It is constructed once per function body and pass, so it may keep
per-run state on ``self``. To add a pass: write such a class in a module of
its own, put it in ``PIPELINE`` where it belongs, and give it a golden test
that runs it alone (``tests/rewriter/test_golden.py``: ``run_alone``).

Flow-aware passes subclass ``FlowWalker``: its ``block`` threads the static
facts (``flow.Env``) through a block with ``flow.thread``, calling
``statement`` on each statement under the facts that hold before it; a
subclass overrides ``statement`` (and ``branch`` for an ``if``) to return the
replacement statements and how control leaves them (``flow.Exits``). So
every pass agrees with ``StaticFlow`` on what is static where.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol

import libcst as cst
from dycl.rewriter.context import RewriteContext
from dycl.rewriter.exits import Block, rebuild_if
from dycl.rewriter.flow import Env, Exits, StaticFlow, else_body, join, thread

if TYPE_CHECKING:
    from dycl.rewriter.inline import Callee, InlinedBody
    from dycl.rewriter.source import ParsedFunction

#: Rewrites a callee for inlining at a call site (``callees.rewrite_callee``,
#: running the same pipeline on the callee's body); None keeps the call.
RewriteCallee = Callable[["Callee", cst.BaseStatement], "InlinedBody | None"]


@dataclass(frozen=True)
class FunctionUnit:
    """One function body being rewritten: what every pass reads about it.

    ``env``: the facts on entry (static parameters, the receiver); passes
    copy it, never change it. ``inlined``: the body is a callee's, to be
    inlined (every ``return`` must end its path). ``rewrite_callee``: how
    ``Inline`` gets a callee's rewritten body. ``input_sizes``: the sizes of the parameters that
    are the root's inputs on every call (``RewriteContext.input_sizes``): the root's own, and a
    callee's parameter passed such an input by name (``Callee.sizes``).
    """

    ctx: RewriteContext
    parsed: ParsedFunction
    definition: cst.FunctionDef
    flow: StaticFlow
    env: Env
    inlined: bool
    rewrite_callee: RewriteCallee
    input_sizes: Mapping[str, tuple[int | None, ...]] = field(default_factory=dict)

    @property
    def parameters(self) -> frozenset[str]:
        return frozenset(p.name.value for p in self.definition.params.params)


class Pass(Protocol):
    """A rewriter pass (see the module docstring)."""

    name: ClassVar[str]
    description: ClassVar[str]

    def __init__(self, unit: FunctionUnit) -> None: ...

    def run(self, body: Block) -> Block: ...


class FlowWalker:
    """Base of the flow-aware passes: walks a block under the static facts.

    The default ``statement`` keeps a statement and applies its effect on the
    facts; the default ``branch`` rewrites only the taken branch of an ``if``
    with a static test (leaving it for constant propagation to remove) and
    both branches of one with a dynamic test, joining their facts.
    """

    name: ClassVar[str]
    description: ClassVar[str]

    def __init__(self, unit: FunctionUnit) -> None:
        self.unit = unit
        self.ctx = unit.ctx
        self.flow = unit.flow

    def run(self, body: Block) -> Block:
        return self.block(body, self.unit.env.copy())[0]

    def block(self, stmts: Block, env: Env | None) -> tuple[Block, Exits]:
        return thread(stmts, env, self.statement)

    def statement(self, stmt: cst.BaseStatement, env: Env) -> tuple[Block, Exits]:
        """The statements replacing ``stmt``, and the facts after them (``env`` may be changed)."""
        if isinstance(stmt, cst.If):
            return self.branch(stmt, env)
        return [stmt], self.flow.step(stmt, env)

    def branch(self, stmt: cst.If, env: Env) -> tuple[Block, Exits]:
        test = self.flow.evaluate(stmt.test, env)
        if test is not None:
            taken, exits = self.block(list(stmt.body.body) if test.value else else_body(stmt), env)
            body, orelse = (taken, else_body(stmt)) if test.value else (list(stmt.body.body), taken)
            return [rebuild_if(stmt, body, orelse)], exits
        body, then_exits = self.block(list(stmt.body.body), env.copy())
        orelse, else_exits = self.block(else_body(stmt), env.copy())
        exits = Exits(join([then_exits.fall, else_exits.fall]), then_exits.breaks + else_exits.breaks,
                      then_exits.continues + else_exits.continues)
        return [rebuild_if(stmt, body, orelse)], exits


class ScopedFlowWalker(FlowWalker):
    """A ``FlowWalker`` that numbers the blocks it walks: ``scopes`` holds the numbers of the
    blocks being walked, innermost last, so a pass can tell whether something recorded in one
    block encloses the statement being walked (not a branch or an iteration beside it)."""

    def __init__(self, unit: FunctionUnit) -> None:
        super().__init__(unit)
        self.scopes: list[int] = []
        self.walked = 0

    def block(self, stmts: Block, env: Env | None) -> tuple[Block, Exits]:
        self.walked += 1
        self.scopes.append(self.walked)
        try:
            return super().block(stmts, env)
        finally:
            self.scopes.pop()
