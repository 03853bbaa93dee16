"""Hoist assignment expressions: ``if (s := x.sum()) > 0:`` becomes ``s = x.sum()`` on the
line before and ``if s > 0:``.

An assignment expression binds its target in the enclosing function (PEP 572) when it is
evaluated. Moving it before its statement keeps that meaning where it is evaluated
whenever the statement runs, and where nothing the statement evaluates before it can
tell the difference:

- it is not in a part evaluated only sometimes: the right of ``and``/``or``, a branch of
  ``a if c else b``, a comprehension or a lambda (refused: hoisting would evaluate it
  always);
- no call is evaluated before it in the statement other than the ones it is an argument
  of (which run after it anyway), and nothing before it reads its target (refused:
  hoisting would reorder a call's effects, or change what ``x + (x := 2)`` reads);
- it is not in a ``while`` test, which runs before every iteration (refused).

Several assignment expressions of one statement are hoisted in evaluation order (an
inner one before the one containing it). ``elif`` tests get theirs at the top of the
``else`` they stand for.

Assumes: the definition is annotated with location comments.
Guarantees: no ``NamedExpr`` remains; each hoisted one met the conditions above.
"""

from __future__ import annotations

import libcst as cst
from dycl.rewriter.errors import UnsupportedError
from dycl.rewriter.locations import LocationTable, comment_of, set_location
from dycl.rewriter.walk import COMPREHENSIONS, children, descendants, map_children

_SOMETIMES = (cst.IfExp, cst.Lambda, *COMPREHENSIONS)
_HINT = "assign on a line of its own before the statement"


class HoistNamedExpr(cst.CSTTransformer):
    """Moves each ``(name := value)`` before its statement (see the module note)."""

    def __init__(self, locations: LocationTable) -> None:
        super().__init__()
        self.locations = locations
        self.elifs: set[int] = set()

    def visit_If(self, node: cst.If) -> None:
        if isinstance(node.orelse, cst.If):
            self.elifs.add(id(node.orelse))

    def visit_While(self, node: cst.While) -> None:
        if any(isinstance(n, cst.NamedExpr) for n in descendants(node.test)):
            raise self._error("an assignment expression (:=) in a while test", node)

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
                                  ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        if not _has_walrus(updated):
            return updated
        if len(updated.body) != 1:
            raise self._error("an assignment expression (:=) on a line with several statements", original)
        hoisted, small = self.hoist(updated.body[0], original)
        return cst.FlattenSentinel([*hoisted, updated.with_changes(body=[small])])

    def leave_For(self, original: cst.For, updated: cst.For) -> cst.BaseStatement | cst.FlattenSentinel:
        if not _has_walrus(updated.iter):
            return updated
        hoisted, iterated = self.hoist(updated.iter, original)
        return cst.FlattenSentinel([*hoisted, updated.with_changes(iter=iterated)])

    def leave_If(self, original: cst.If, updated: cst.If) -> cst.BaseStatement | cst.FlattenSentinel:
        if isinstance(updated.orelse, cst.If) and _has_walrus(updated.orelse.test):
            elif_ = updated.orelse
            hoisted, test = self.hoist(elif_.test, elif_)
            block = cst.IndentedBlock([*hoisted, elif_.with_changes(test=test)])
            updated = updated.with_changes(orelse=cst.Else(block))
        if id(original) in self.elifs or not _has_walrus(updated.test):
            return updated  # an elif's test is hoisted by the if it belongs to
        hoisted, test = self.hoist(updated.test, original)
        return cst.FlattenSentinel([*hoisted, updated.with_changes(test=test)])

    def hoist(self, node: cst.CSTNode, stmt: cst.CSTNode) -> tuple[list[cst.BaseStatement], cst.CSTNode]:
        """Assignments for the assignment expressions in ``node`` (in evaluation order), and
        ``node`` with each replaced by its target."""
        _check_order(node, lambda what: self._error(what, stmt))
        lines: list[cst.BaseStatement] = []

        def replace(current: cst.CSTNode) -> cst.CSTNode:
            current = map_children(current, replace)  # inner ones first: they are evaluated first
            if isinstance(current, cst.NamedExpr):
                assign = cst.Assign([cst.AssignTarget(current.target.with_changes(lpar=[], rpar=[]))],
                                    current.value.with_changes(lpar=[], rpar=[]))
                lines.append(set_location(cst.SimpleStatementLine([assign]), comment_of(stmt)))
                return current.target.with_changes(lpar=[], rpar=[])
            return current

        return lines, replace(node)

    def _error(self, construct: str, where: cst.CSTNode) -> UnsupportedError:
        return UnsupportedError(construct, self.locations.resolve(where), _HINT)


def _has_walrus(node: cst.CSTNode) -> bool:
    return any(isinstance(n, cst.NamedExpr) for n in descendants(node))


def _check_order(node: cst.CSTNode, error) -> None:
    """Refuse an assignment expression evaluated only sometimes, or after a call or a read of
    its target that hoisting would move it before (see the module note)."""
    seen_calls: list[cst.Call] = []
    seen_names: list[str] = []

    def walk(current: cst.CSTNode, ancestors: tuple[cst.CSTNode, ...], sometimes: bool) -> None:
        if isinstance(current, cst.NamedExpr):
            if sometimes:
                raise error("an assignment expression (:=) that runs only sometimes (after and/or, "
                            "in x if c else y, a comprehension or a lambda)")
            target = current.target.value
            if any(call not in ancestors for call in seen_calls) or target in seen_names:
                raise error("an assignment expression (:=) after a call or a read of its name in the same "
                            "statement")
        if isinstance(current, cst.Name):
            seen_names.append(current.value)
        parts = list(children(current))
        for i, child in enumerate(parts):
            later = isinstance(current, cst.BooleanOperation) and i > 0
            walk(child, (*ancestors, current), sometimes or later or isinstance(current, _SOMETIMES))
        if isinstance(current, cst.Call):
            seen_calls.append(current)

    walk(node, (), False)


def hoist_named_expressions(definition: cst.FunctionDef, locations: LocationTable) -> cst.FunctionDef:
    """``definition`` with its assignment expressions hoisted (see the module note)."""
    if not _has_walrus(definition.body):
        return definition
    return definition.visit(HoistNamedExpr(locations))


__all__ = ["HoistNamedExpr", "hoist_named_expressions"]
