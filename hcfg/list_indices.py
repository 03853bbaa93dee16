"""A Python list of ints that crosses into a sub-DNN and indexes a tensor there (``h[keep]``).

Ports carry a list of host ints as one 0-d tensor per element, and torch reads ``h[[t0, t1]]`` as
the tuple index ``h[t0, t1]``, not as the list of rows eager selects. So a list input that the
sub-DNN reads only as the one index of subscripts (``h[keep]``, ``scores[keep]``) on every
example is passed instead as one 1-d int64 tensor (``index_lists``, ``as_index_tensors``): torch
indexes with it exactly as with the list (the rows in its order, repeats and negative indices
included, ``h[[]]``'s empty selection too), and the host passes the list itself, which every
runtime converts to the port's dtype (``np.asarray(keep, dtype=int64)``). Its length is a fresh
symbol (``Variant`` ports: ``hcfg.variants``), as are the output dims of the example's length.

Any other list of ints that indexes a tensor (read otherwise too, ``len(keep)``; a tuple, which
indexes dims, is passed as it is) is refused before export at the user's line
(``refuse_int_list_indices``).
"""

from __future__ import annotations

from typing import Any

import libcst as cst
import torch
from dycl.hcfg.nodes import SubDNN, source_of
from dycl.rewriter.errors import SourceLocation, UnsupportedError
from dycl.rewriter.locations import LocationTable
from dycl.rewriter.walk import descendants


def _is_int_list(value: Any) -> bool:
    return type(value) in (list, tuple) and len(value) > 0 and all(type(v) is int for v in value)


def _is_index_list(value: Any) -> bool:
    """A list (not a tuple) of plain ints, maybe empty: what ``as_index_tensors`` converts."""
    return type(value) is list and all(type(v) is int for v in value)


def _bare_index(node: cst.Subscript) -> str | None:
    """The name ``node`` indexes with, where its one index is a bare name (``h[keep]``)."""
    if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        value = node.slice[0].slice.value
        if isinstance(value, cst.Name):
            return value.value
    return None


class _BareIndex(cst.CSTVisitor):
    """The subscripts whose one index is a bare name of ``names``."""

    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.found: str | None = None

    def visit_Subscript(self, node: cst.Subscript) -> None:
        name = _bare_index(node)
        if self.found is None and name in self.names:
            self.found = name


def _read_only_as_index(name: str, statements: tuple[cst.SimpleStatementLine, ...]) -> bool:
    """Whether every read of ``name`` in ``statements`` is the one index of a subscript, and none binds it."""
    indexes = reads = 0
    for statement in statements:
        for node in descendants(statement):
            if isinstance(node, cst.Subscript) and _bare_index(node) == name:
                indexes += 1
            elif isinstance(node, cst.Name) and node.value == name:
                reads += 1
            elif isinstance(node, (cst.AssignTarget, cst.AugAssign)) and name in {
                    n.value for n in descendants(node.target) if isinstance(n, cst.Name)}:
                return False
    return indexes > 0 and reads == indexes  # each index's own Name node is counted once among the reads


def index_lists(sub: SubDNN, inputs: list[tuple[Any, ...]]) -> frozenset[str]:
    """The inputs of ``sub`` that are lists of ints on every example and that it reads only as the
    index of subscripts: passed as 1-d int64 tensors (module note)."""
    return frozenset(name for position, name in enumerate(sub.inputs)
                     if inputs and all(_is_index_list(values[position]) for values in inputs)
                     and _read_only_as_index(name, sub.statements))


def as_index_tensors(sub: SubDNN, values: tuple[Any, ...], names: frozenset[str],
                     mirror: bool = False) -> tuple[Any, ...]:
    """``values`` with the lists of ``names`` as 1-d int64 tensors (``h[[]]`` selects no row: empty);
    ``mirror``: values of a symbolic run (``hcfg.symbolic``), of which only the length counts."""
    def converted(value: Any) -> torch.Tensor:
        if mirror:
            return torch.zeros(len(value), dtype=torch.int64)
        return torch.tensor(value, dtype=torch.int64).reshape(len(value))

    return tuple(converted(value) if name in names and isinstance(value, list) else value
                 for name, value in zip(sub.inputs, values))


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
                f"`{source_of(statement.body[0])}`), which the compiled part also reads otherwise", location,
                "read the list only as an index there (`h[keep]`), pass its length as a number of its own, or "
                "compute the selection with tensor operations: a boolean mask (`h[h[:, 0] > 0]`) or "
                "torch.nonzero of one")


__all__ = ["as_index_tensors", "index_lists", "refuse_int_list_indices"]
