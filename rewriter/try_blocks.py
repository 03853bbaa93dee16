"""Splice ``try`` statements: compile the body, the ``else`` and the ``finally`` clause in
sequence, and drop the handlers.

A handler runs only if the body raises. The body is then compiled like any other code,
and what makes dropping the handlers sound is what happens to that code:

- **On the example, on every path.** Exploration (``hcfg.build``) runs every statement of
  every branch on the example input; a body that raises there is refused at its line,
  never compiled without its handler. So for the example's shapes and values, on every
  path, the body does not raise and the handler cannot run.
- **On other inputs.** The host checks each input's type, dtype and static dims against the
  compiled signature. The body's Python decisions are the folded ones or host code that
  runs as written; its tensor code runs as sub-DNN graphs. Where the body would raise on
  another input (a size a symbolic dim reaches that a ``view`` rejects, an index out of
  range), the runtime or host code raises instead of the handler running: the compiled
  model then fails where eager would have recovered — an error, never a different answer.
  It relies on the runtime checking what torch checks (ONNX Runtime checks shapes and
  gather indices).
- **Exceptions raised on purpose are not assumed away.** A body holding ``raise`` or
  ``assert`` (outside nested functions) is refused: its exception exists to be caught.

``else`` runs when the body completes, so it follows the body; ``finally`` always runs,
so it follows them both. A body or ``else`` that may leave the block (``return``,
``break``, ``continue``) before a ``finally`` is refused (the ``finally`` would have to
run before each exit).

Assumes: the definition is annotated with location comments.
Guarantees: no ``try`` statement remains; every removed one met the conditions above;
``try``/``except*`` (``TryStar``) is left for ``rewriter.check`` to refuse.
"""

from __future__ import annotations

import libcst as cst
from dycl.rewriter.errors import UnsupportedError
from dycl.rewriter.exits import contains
from dycl.rewriter.locations import LocationTable
from dycl.rewriter.walk import descendants

_RAISING = (cst.Raise, cst.Assert)
_EXITS = (cst.Return, cst.Break, cst.Continue)


class SpliceTry(cst.CSTTransformer):
    """Replaces each ``try`` by its body, ``else`` and ``finally`` (see the module note)."""

    def __init__(self, locations: LocationTable) -> None:
        super().__init__()
        self.locations = locations

    def leave_Try(self, original: cst.Try, updated: cst.Try) -> cst.FlattenSentinel[cst.BaseStatement]:
        body = list(updated.body.body)
        orelse = list(updated.orelse.body.body) if updated.orelse is not None else []
        final = list(updated.finalbody.body.body) if updated.finalbody is not None else []
        if updated.handlers and any(contains(stmt, _RAISING, into_loops=True) for stmt in body):
            raise self._error("a try statement whose body raises an exception for its handler to catch",
                              original, "test the condition with if/else instead of raising and catching")
        if final and _may_leave(body + orelse):
            raise self._error("a return, break or continue inside a try statement with a finally clause",
                              original, "move the exit after the try statement")
        return cst.FlattenSentinel(body + orelse + final)

    def _error(self, construct: str, where: cst.CSTNode, hint: str) -> UnsupportedError:
        return UnsupportedError(construct, self.locations.resolve(where), hint)


def _may_leave(stmts: list[cst.BaseStatement]) -> bool:
    """Whether ``stmts`` may leave the enclosing block: a ``return`` anywhere, or a
    ``break``/``continue`` outside a loop of their own (not looking into nested functions)."""
    return any(contains(stmt, (cst.Return,), into_loops=True) or contains(stmt, _EXITS[1:], into_loops=False)
               for stmt in stmts)


def splice_try(definition: cst.FunctionDef, locations: LocationTable) -> cst.FunctionDef:
    """``definition`` with every ``try`` statement spliced (see the module note)."""
    if not any(isinstance(node, cst.Try) for node in descendants(definition.body)):
        return definition
    return definition.visit(SpliceTry(locations))


__all__ = ["SpliceTry", "splice_try"]
