"""A ``for`` loop whose bound is a literal chosen by data: one loop per literal, under a test.

``steps = 2 if x.mean() > 0 else 3`` then ``for _ in range(steps):`` iterates a number of
times that is not static, but is one of two. ``Unroll`` cannot unroll it as written; this
module writes it as

    if steps == 2:
        for _ in range(2): ...
    else:
        if steps == 3:
            for _ in range(3): ...
        else:
            raise RuntimeError(...)

whose loops ``Unroll`` unrolls, the test a host condition on a host number (``rewriter.choices``
keeps ``steps == 2`` as it is written: a test of a value).

Assumes: ``definitions`` holds the assignments walked so far (``rewriter.bounded_rows``), a
name bound any other way (a branch, a loop, a target list) recorded without a value; the last
definition, walked in a block that encloses the loop (``encloses``), reaches it on every path.

Guarantees: ``per_literal`` answers only where the loop's iterable reads exactly one name that
is not static, whose reaching definition is a conditional expression (nested ones too) all of
whose results are static literals, none of the names it reads bound again since. Only the
iterable is rewritten (the body still reads the name, as Python's body does). A value outside
those literals, which the definition cannot give, raises rather than picking a loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import libcst as cst
from dycl.rewriter.bounded_rows import Definitions
from dycl.rewriter.choice_domains import Substitute
from dycl.rewriter.choice_lowering import Lowering
from dycl.rewriter.exits import Block
from dycl.rewriter.names import Namespace
from dycl.rewriter.values import Static, is_literal, literal_term
from dycl.rewriter.walk import read_names

#: how many literals a bound may be chosen from (each is one more copy of the loop)
MAX_CHOICES = 8
_MISSING = '"dycl: a loop bound chosen by data took a value the loop was not compiled for"'


def per_literal(loop: cst.For, definitions: Definitions, evaluate: Callable[[cst.BaseExpression], Static | None],
                namespace: Namespace, encloses: Callable[[str], bool]) -> Block | None:
    """``loop`` as one copy per literal its bound may be (module note), or None where it is not
    such a loop. ``evaluate``: an expression's static value where the loop is, None if dynamic;
    ``encloses(name)``: whether the last binding of ``name`` was in a block enclosing the loop."""
    unknown = [name for name in sorted(read_names(loop.iter)) if evaluate(cst.Name(name)) is None]
    if len(unknown) != 1 or not encloses(unknown[0]):
        return None  # bound in a branch or an iteration beside the loop: it may not reach it
    name = unknown[0]
    defined, value = definitions.before(name, definitions.now + 1)
    if not isinstance(value, cst.IfExp) or any(definitions.before(read, definitions.now + 1)[0] > defined
                                               for read in read_names(value)):
        return None  # a name its results read was bound again since: they may not be what they were
    literals = _literals(value, evaluate)
    if not literals or len(literals) > MAX_CHOICES:
        return None
    options = [(cst.Comparison(cst.Name(name), [cst.ComparisonTarget(cst.Equal(), literal_term(v))]), literal_term(v))
               for v in literals]
    missing = cst.Raise(cst.Call(cst.Name("RuntimeError"), [cst.Arg(cst.SimpleString(_MISSING))]))
    return Lowering(namespace, loop).per_option(
        options, missing, lambda term: loop.with_changes(iter=loop.iter.visit(Substitute(name, term))))


def _literals(node: cst.BaseExpression, evaluate: Callable[[cst.BaseExpression], Static | None]
              ) -> tuple[Any, ...] | None:
    """The static literals a (nested) conditional expression may give, in order, else None."""
    if isinstance(node, cst.IfExp):
        body, orelse = _literals(node.body, evaluate), _literals(node.orelse, evaluate)
        return tuple(dict.fromkeys(body + orelse)) if body is not None and orelse is not None else None
    value = evaluate(node)
    if value is None or not is_literal(value.value) or isinstance(value.value, (list, dict)):
        return None
    return (value.value,)


__all__ = ["MAX_CHOICES", "per_literal"]
