"""Lists whose length is a function of the path: ``parts = []`` then ``parts.append(x)``.

Note: why such a length is static per explored state. A list built only by a display
of fixed size (``parts = []``, ``acc = [x, y]``) and changed only by ``append``,
``insert`` and ``pop`` (each changes the length by exactly one) has, at any point, a
length fixed by the statements the path ran to get there — not by any tensor's value.
Exploration (``hcfg.state``) keeps states with different list lengths apart, so in each
explored state such a list has the length every call on that path gives it. A test of
its length (``if parts:``, ``if not parts``, ``len(parts) > 0``) is then decided per
state like a type test (``hcfg.type_tests``): a state enters only the branch it takes,
and ``torch.stack(parts)`` is never run on the state whose list is empty.

Assumes: a library or submodule call that receives the list (``torch.stack(parts)``)
does not change its length; user functions were inlined by the rewriter, so what is
left are torch's and libraries' functions.

Guarantees: ``path_fixed_lengths`` names only local names every binding of which is such
a display and every other occurrence of which is one of: a receiver of ``append``/
``insert``/``pop``, ``len(name)``, an argument of a call, an item read or write with an
index (no slice), or an operand of ``if``/``not``/``and``/``or``. Anything else (an
alias ``other = parts``, ``extend``, a comprehension's result, ``parts += xs``, a slice
assignment, an input) keeps the name out: its length may follow data.
"""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst
from dycl.rewriter.walk import descendants, target_names

#: methods that change a list's length by exactly one, or read it
_COUNTED_METHODS = frozenset({"append", "insert", "pop", "index", "count"})


def _fixed_display(value: cst.BaseExpression) -> bool:
    return isinstance(value, (cst.List, cst.Tuple)) and not any(
        isinstance(element, cst.StarredElement) for element in value.elements)


def _candidates(nodes: list[cst.CSTNode]) -> tuple[set[str], set[str], set[int]]:
    """Names bound by a fixed display, names bound any other way, and the ids of the
    display-bound target ``Name`` nodes."""
    fixed, other, targets = set(), set(), set()
    for node in nodes:
        if isinstance(node, cst.Assign):
            for target in node.targets:
                if isinstance(target.target, cst.Name) and _fixed_display(node.value):
                    fixed.add(target.target.value)
                    targets.add(id(target.target))
                elif not isinstance(target.target, cst.Subscript):
                    other.update(target_names(target.target))
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr, cst.CompFor)):
            other.update(target_names(node.target))
        elif isinstance(node, cst.AsName):
            other.update(target_names(node.name))
        elif isinstance(node, cst.Param):
            other.add(node.name.value)
    return fixed, other, targets


def _allowed_uses(node: cst.CSTNode) -> Iterable[cst.CSTNode]:
    """The children of ``node`` that, where they are a bare name, use a list without
    changing its length by an amount that could follow data."""
    if isinstance(node, cst.Call):
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in _COUNTED_METHODS:
            yield node.func.value
        yield from (arg.value for arg in node.args if not arg.star)
    elif isinstance(node, cst.Subscript) and all(isinstance(e.slice, cst.Index) for e in node.slice):
        yield node.value
    elif isinstance(node, (cst.If, cst.While, cst.IfExp)):
        yield node.test
    elif isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        yield node.expression
    elif isinstance(node, cst.BooleanOperation):
        yield from (node.left, node.right)


def path_fixed_lengths(statements: Iterable[cst.CSTNode]) -> frozenset[str]:
    """The local names in ``statements`` whose list length is a function of the path (see the note)."""
    nodes = [n for statement in statements for n in descendants(statement)]
    fixed, other, allowed = _candidates(nodes)
    for node in nodes:
        allowed.update(id(child) for child in _allowed_uses(node) if isinstance(child, cst.Name))
    used_otherwise = {n.value for n in nodes if isinstance(n, cst.Name) and n.value in fixed and id(n) not in allowed}
    return frozenset(fixed - other - used_otherwise)


__all__ = ["path_fixed_lengths"]
