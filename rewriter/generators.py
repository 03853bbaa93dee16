"""A generator helper consumed in ``forward`` (``for h in self._features(x):``,
``sum(self._stages(x))``, ``list(...)``) as the function that returns the list of what it
yields.

``yield v`` becomes ``<acc>.append(v)``, ``yield from it`` ``<acc>.extend(it)``, and every
``return`` (and the end of the body) ``return <acc>``, where ``<acc>`` is a fresh list
created first. The caller then iterates a list of statically known length, which
``Unroll`` unrolls.

Note: why a list may stand for the generator. A generator runs its body lazily, between
the consumer's steps; the list runs it all at the call. The two differ only where the
consumer and the body see each other's effects between steps (a container both change,
module state), or where the consumer stops early and the rest of the body would have
raised or had an effect. A helper written to produce a model's features does neither:
its body computes tensors from its arguments (module state writes are refused anyway,
``rewriter.state_writes``). The root ``forward`` is never converted (its caller gets a
generator object: refused by ``rewriter.check``).

Assumes: ``definition`` is a generator function's, annotated with location comments.
Guarantees: no ``yield`` remains; a ``yield`` used as a value (``x = yield v``, what
``send`` feeds) or a ``return`` with a value raises ``UnsupportedError`` at its line.
"""

from __future__ import annotations

import libcst as cst
from dycl.rewriter.errors import UnsupportedError
from dycl.rewriter.locations import LocationTable, comment_of, set_location
from dycl.rewriter.walk import all_names, descendants

_HINT = "collect the values in a list and return it"


class YieldToList(cst.CSTTransformer):
    """Rewrites ``yield`` statements and ``return``s of one generator (see the module note)."""

    def __init__(self, accumulator: str, locations: LocationTable) -> None:
        super().__init__()
        self.accumulator = accumulator
        self.locations = locations
        self.statement: cst.CSTNode | None = None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return self.statement is None  # the generator itself, not functions nested in it

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.statement = node

    def leave_Expr(self, original: cst.Expr, updated: cst.Expr) -> cst.BaseSmallStatement:
        if not isinstance(updated.value, cst.Yield):
            return updated
        value = updated.value.value
        if isinstance(value, cst.From):
            return cst.Expr(self._call("extend", value.item))
        return cst.Expr(self._call("append", value if value is not None else cst.Name("None")))

    def leave_Yield(self, original: cst.Yield, updated: cst.Yield) -> cst.Yield:
        return updated  # a yield statement is rewritten by leave_Expr; any other is caught below

    def leave_Return(self, original: cst.Return, updated: cst.Return) -> cst.Return:
        if updated.value is not None and not (isinstance(updated.value, cst.Name) and updated.value.value == "None"):
            raise UnsupportedError("a generator that returns a value", self.locations.resolve(self.statement), _HINT)
        return cst.Return(cst.Name(self.accumulator))

    def _call(self, method: str, argument: cst.BaseExpression) -> cst.Call:
        return cst.Call(cst.Attribute(cst.Name(self.accumulator), cst.Name(method)), [cst.Arg(argument)])


def generator_as_list(definition: cst.FunctionDef, locations: LocationTable) -> cst.FunctionDef:
    """The list-returning function for the generator ``definition`` (see the module note)."""
    taken = all_names(definition)
    accumulator = next(f"yielded_{i}" for i in range(1, len(taken) + 2) if f"yielded_{i}" not in taken)
    rewritten = definition.visit(YieldToList(accumulator, locations))
    for node in descendants(rewritten.body, stop=(cst.FunctionDef, cst.Lambda)):
        if isinstance(node, cst.Yield):
            where = next((s for s in descendants(rewritten.body) if isinstance(s, cst.SimpleStatementLine)
                          and any(n is node for n in descendants(s))), None)
            raise UnsupportedError("a yield used as a value (x = yield v)", locations.resolve(where), _HINT)
    body = list(rewritten.body.body)
    comment = comment_of(body[0]) if body else None
    start = set_location(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(accumulator))],
                                                             cst.List([]))]), comment)
    end = set_location(cst.SimpleStatementLine([cst.Return(cst.Name(accumulator))]), comment_of(body[-1]))
    return rewritten.with_changes(body=rewritten.body.with_changes(body=[start, *body, end]))


__all__ = ["YieldToList", "generator_as_list"]
