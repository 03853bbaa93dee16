"""Loops whose trip count comes from data or from an input's sizes: the part of ``Unroll`` that reads them.

``DataLoops`` is a mixin of ``rewriter.unroll.Unroll`` (it uses the walker's ``ctx``, ``unit``,
``flow``, ``scopes``, its ``definitions`` and ``walked_in`` and its ``_assign``):

- ``_bounded_range``: ``range(n)`` with ``n`` from data and a static cap (``rewriter.trip_bounds``)
  unrolls to the cap, each iteration run only while its value is below the stop; ``n`` an exact
  static size of an input (``tensor_rows.size_of``) unrolls exactly;
- ``_tensor_rows``: the rows of an input along a static dim (``rewriter.tensor_rows``), or the
  refusal naming the symbolic dim;
- ``_row_displays``: an input's rows taken as a sequence become a display (``rewriter.row_displays``).

Assumes: the input sizes (``FunctionUnit.input_sizes``) are those of the root's inputs; a callee's
body reads them only through a parameter passed such an input by name (``inline.Callee.sizes``).
Guarantees: what each part's module guarantees; a loop none of them takes is left to ``Unroll``'s
other rules or its refusal.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from dycl.rewriter.bounded_rows import Calculus
from dycl.rewriter.exits import Block
from dycl.rewriter.flow import Env
from dycl.rewriter.row_displays import RowDisplays
from dycl.rewriter.tensor_rows import SymbolicDim, rows, size_of
from dycl.rewriter.trip_bounds import ValueCalculus
from dycl.rewriter.values import Static, literal_term, subscript_term

MAX_TRIPS = 10_000


@dataclass(frozen=True)
class Element:
    """One item a loop iterates over: its static value (None if dynamic) and a term for it."""

    static: Static | None
    term: cst.BaseExpression
    exists: cst.BaseExpression | None = None  # a loop over rows from data: whether this iteration runs


class DataLoops:
    """Loops counted by data or by input sizes (module note); mixed into ``Unroll``."""

    def _row_displays(self, stmt: cst.BaseStatement, env: Env) -> cst.BaseStatement:
        """``list(x[0])``, ``max(x.unbind(1), key=f)``: an input's rows as a display (``rewriter.row_displays``)."""
        if not self.unit.input_sizes or not isinstance(stmt, cst.SimpleStatementLine):
            return stmt
        calculus = self._calculus(Calculus, env)
        displays = RowDisplays(lambda node: self.flow.evaluate(node, env),
                               lambda node: rows(node, calculus, self.unit.input_sizes))
        rewritten = stmt.visit(displays)
        return rewritten if displays.changed else stmt

    def _calculus(self, kind: type[Calculus], env: Env) -> Calculus:
        """A bound calculus (``rewriter.bounded_rows``) for the statement being walked; the root's input
        sizes are known in the root's body, and in a callee's for a parameter passed one by name."""
        sizes = self.unit.input_sizes
        return kind(self.definitions, lambda node: self.flow.evaluate(node, env), self._reaches, sizes)

    def _reaches(self, name: str, time: int) -> bool:
        """Whether the definition of ``name`` made at ``time`` was walked in a block that encloses
        the statement being walked, so that it reaches it on every path (``bounded_rows.Reaches``)."""
        scopes = self.walked_in.get((name, time))
        return scopes is not None and tuple(self.scopes[:len(scopes)]) == scopes

    def _tensor_rows(self, node: cst.BaseExpression, env: Env, loop: cst.For) -> list[Element] | None:
        """The rows of a tensor of the root's inputs along a static dim (``rewriter.tensor_rows``)."""
        if not self.unit.input_sizes:
            return None
        count = rows(node, self._calculus(Calculus, env), self.unit.input_sizes)
        if isinstance(count, SymbolicDim):
            raise self.ctx.error(
                f"a for loop over the rows of {count.input} along its dim {count.axis}, which dynamic= makes "
                "symbolic (the batch dim by default): how many there are differs from call to call", loop,
                "compile with dynamic=False to unroll the example's rows (the compiled model then takes that "
                "size only), or loop over range(K) with a static K (a number the model holds) and index the rows")
        if count is None:
            return None
        if count > MAX_TRIPS:
            raise self.ctx.error(f"a for loop over {count} rows (more than {MAX_TRIPS})", loop)
        return [Element(None, subscript_term(node, i)) for i in range(count)]

    def _bounded_range(self, loop: cst.For, env: Env) -> tuple[list[Element], Block] | None:
        """``range(n)`` (static start and step) whose ``n`` comes from data but has a static upper
        bound (``rewriter.trip_bounds``): iterations up to the bound, each run only while its value is
        below the stop, computed once before the loop as Python computes it."""
        call = loop.iter
        function = self.flow.evaluate(call.func, env) if isinstance(call, cst.Call) else None
        if not range_call(call, function) or not 1 <= len(call.args) <= 3:
            return None
        arguments = [self.flow.evaluate(a.value, env) for a in call.args]
        start = arguments[0] if len(arguments) > 1 else Static(0, None)
        step = arguments[2] if len(arguments) > 2 else Static(1, None)
        if start is None or step is None or not all(_plain_int(v.value) for v in (start, step)) or step.value < 1:
            return None
        stop_node = call.args[0 if len(call.args) == 1 else 1].value
        exact = size_of(stop_node, self._calculus(Calculus, env), self.unit.input_sizes)
        if exact is not None and exact > MAX_TRIPS:
            raise self.ctx.error(f"a for loop of {exact} iterations (more than {MAX_TRIPS})", loop)
        if exact is not None:  # a static size of an input: every call has it (rewriter.tensor_rows)
            return [literal_element(value) for value in range(start.value, exact, step.value)], []
        calculus = self._calculus(ValueCalculus, env)
        ceiling = calculus.ceiling(stop_node, 0, self.definitions.now + 1)
        if ceiling is None:
            return None
        bound = len(range(start.value, ceiling, step.value))  # the stop is an int no greater than its ceiling
        if bound > MAX_TRIPS:
            raise self.ctx.error(f"a for loop of up to {bound} iterations (more than {MAX_TRIPS})", loop)
        if loop.orelse is not None:
            raise self.ctx.error("a for loop with an else clause whose trip count depends on the input", loop,
                                 "set a flag where the loop breaks and test it after the loop")
        # Note: why the stop, not len(range(...)). Python evaluates the stop once; iteration j runs while
        # start + j * step < stop (step > 0). Exported, range() of a size would pin every size of its tensor.
        # The type of the stop (an int, or a float that range() refuses) is one per path: the example ran.
        stop = cst.Name(self.ctx.namespace.fresh("stop"))
        prologue = [self._assign(stop, stop_node, loop)]
        values = [start.value + j * step.value for j in range(bound)]
        return [Element(literal_element(value).static, literal_term(value),
                        cst.Comparison(stop, [cst.ComparisonTarget(cst.GreaterThan(), literal_term(value))]))
                for value in values], prologue


def range_call(node: cst.BaseExpression, function: Static | None) -> bool:
    """``range(...)`` called with plain arguments (the builtin, however it is named)."""
    return (isinstance(node, cst.Call) and function is not None and function.value is range
            and not any(a.star or a.keyword is not None for a in node.args))


def _plain_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def literal_element(value) -> Element:
    return Element(Static(value, literal_term(value)), literal_term(value))



__all__ = ["MAX_TRIPS", "DataLoops", "Element", "literal_element", "range_call"]
