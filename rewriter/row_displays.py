"""The rows of an input as a display, where code takes them as a sequence (``rewriter.unroll``).

``rows = list(x[0])``, ``max(x.unbind(1), key=lambda r: r.sum())``, ``tuple(x.unbind(2))``: a
sequence of tensors whose length is a dim of an input. Where that dim is static
(``rewriter.tensor_rows``), writing the sequence out as a display of its items gives later passes
a sequence of static length: ``Choices`` lowers ``max``/``min`` with a ``key`` over it to a
host comparison per item, and a list bound to a name has a known length (``ListLength``)::

    rows = list(x[0])              ->  rows = [x[0][0], x[0][1], x[0][2]]
    max(x.unbind(1), key=f)        ->  max((x.unbind(1)[0], x.unbind(1)[1]), key=f)

Assumes: ``count(node)`` is ``tensor_rows.rows`` where the statement is (an int only where the
count is exact on every call). Guarantees: only the argument of ``list(...)``/``tuple(...)`` and the
sequence of ``max``/``min``/``sorted`` called with ``key=`` (the builtins, however named) are replaced, by a
display of the same items in the same order; code inside a lambda or a comprehension, whose names
may be its own, is left as it is.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
from dycl.rewriter.values import Static, subscript_term

#: the most items a display is written with
MAX_ITEMS = 256


class RowDisplays(cst.CSTTransformer):
    """Rewrites one statement (module note); ``changed`` says whether it did."""

    def __init__(self, evaluate: Callable[[cst.BaseExpression], Static | None],
                 count: Callable[[cst.BaseExpression], object]) -> None:
        super().__init__()
        self.evaluate = evaluate
        self.count = count
        self.changed = False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_ListComp(self, node: cst.ListComp) -> bool:
        return False

    visit_GeneratorExp = visit_SetComp = visit_DictComp = visit_ListComp

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        positional = [a for a in updated.args if a.keyword is None]
        if len(positional) != 1 or positional[0].star:
            return updated
        function = self.evaluate(updated.func)
        keys = [a.keyword.value for a in updated.args if a.keyword is not None]
        if function is None or not ((function.value in (list, tuple) and not keys)
                                    or (function.value in (max, min) and keys == ["key"])
                                    or (function.value is sorted and "key" in keys)):
            return updated
        rows = self.count(positional[0].value)
        if not isinstance(rows, int) or isinstance(rows, bool) or rows > MAX_ITEMS:
            return updated
        elements = [cst.Element(subscript_term(positional[0].value, i), comma=cst.Comma(
            whitespace_after=cst.SimpleWhitespace(" " if i + 1 < rows else ""))) for i in range(rows)]
        if len(elements) > (0 if function.value is list else 1):  # (a,): the one comma a tuple needs
            elements[-1] = elements[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        display = cst.List(elements) if function.value is list else cst.Tuple(elements)
        self.changed = True
        if function.value is list or function.value is tuple:
            return display
        return updated.with_changes(args=[a.with_changes(value=display) if a is positional[0] else a
                                          for a in updated.args])


__all__ = ["RowDisplays"]
