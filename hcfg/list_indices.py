"""Refuse a Python list of ints that crosses into a sub-DNN and indexes a tensor there (``h[keep]``).

Assumes the sub-DNN's inputs are exported as ports: a list of host ints becomes one 0-d tensor
per element, and torch reads ``h[[t0, t1]]`` as the tuple index ``h[t0, t1]``, not as the list
of rows eager selects (the exporter then fails with a raw ``IndexError``, or, where the ranks
allow it, indexes the wrong elements). Guarantees: such a sub-DNN is refused before export, at
the user's line, with the fix (a boolean mask computed with tensor operations).
"""

from __future__ import annotations

from typing import Any

import libcst as cst
from dycl.hcfg.nodes import SubDNN, source_of
from dycl.rewriter.errors import SourceLocation, UnsupportedError
from dycl.rewriter.locations import LocationTable


def _is_int_list(value: Any) -> bool:
    return type(value) in (list, tuple) and len(value) > 0 and all(type(v) is int for v in value)


class _BareIndex(cst.CSTVisitor):
    """The subscripts whose one index is a bare name of ``names``."""

    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.found: str | None = None

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if self.found is None and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            value = node.slice[0].slice.value
            if isinstance(value, cst.Name) and value.value in self.names:
                self.found = value.value


def refuse_int_list_indices(sub: SubDNN, inputs: list[tuple[Any, ...]], layouts: list[tuple[Any, ...]],
                            locations: LocationTable) -> None:
    """Refuse ``sub`` where an input that is a list of ints passed as ports (not folded as a
    constant) on some example indexes a tensor."""
    lists = {name for values, shapes in zip(inputs, layouts)
             for name, value, layout in zip(sub.inputs, values, shapes)
             if _is_int_list(value) and layout.port_count > 0}
    if not lists:
        return
    for statement in sub.statements:
        visitor = _BareIndex(lists)
        statement.visit(visitor)
        if visitor.found is not None:
            location: SourceLocation | None = locations.resolve(statement)
            raise UnsupportedError(
                f"indexing a tensor with a Python list of ints computed before it ({visitor.found!r} in "
                f"`{source_of(statement.body[0])}`)", location,
                "compute the selection with tensor operations: a boolean mask (`h[h[:, 0] > 0]`) or "
                "torch.nonzero of one, not a Python list")
