"""Replace name references in an expression or statement.

Guarantees: a replacement is parenthesised where its new place needs it
(``rewriter.precedence``): the result prints as text that Python reads as the tree.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
from dycl.rewriter.precedence import ATOM, NUMBERS, fix_slots, precedence
from dycl.rewriter.walk import COMPREHENSIONS, all_names, descendants, map_children

_SCOPES = (cst.Lambda, *COMPREHENSIONS)


class NameReplacer(cst.CSTTransformer):
    """Replaces every ``Name`` that refers to a variable by ``replace(name)``
    (when that returns an expression).

    Assumes: the node holds no nested function or class definitions.
    Guarantees: attribute names (``x.attr``), keyword names (``f(k=1)``) and
    names bound inside comprehensions or lambdas are left alone; assignment
    targets *are* replaced, so a mapping to fresh ``Name`` nodes renames.
    """

    def __init__(self, replace: Callable[[str], cst.BaseExpression | None]) -> None:
        super().__init__()
        self.replace = replace
        self._skip: set[int] = set()
        self._shadowed: list[set[str]] = []
        self._placed: set[int] = set()  # replacements that may need parentheses where they were put

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._skip.add(id(node.attr))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._skip.add(id(node.keyword))

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._shadowed.append(all_names(node.target))

    def leave_CompFor(self, original: cst.CompFor, updated: cst.CompFor) -> cst.CompFor:
        self._shadowed.pop()
        return updated

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self._shadowed.append({p.name.value for p in node.params.params})
        for param in node.params.params:
            self._skip.add(id(param.name))

    def leave_Lambda(self, original: cst.Lambda, updated: cst.Lambda) -> cst.Lambda:
        self._shadowed.pop()
        return updated

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        if id(original) in self._skip or any(original.value in s for s in self._shadowed):
            return updated
        replacement = self.replace(original.value)
        if replacement is None:
            return updated
        _note_placed(replacement, self._placed)
        return replacement

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):
        updated = super().on_leave(original_node, updated_node)
        if self._placed and isinstance(updated, cst.CSTNode) and updated is not original_node:
            return fix_slots(updated, self._placed)
        return updated


def _note_placed(replacement: cst.BaseExpression, placed: set[int]) -> None:
    if precedence(replacement) < ATOM or isinstance(replacement, NUMBERS):
        placed.add(id(replacement))


def replace_names(node: cst.CSTNode, replace: Callable[[str], cst.BaseExpression | None]) -> cst.CSTNode:
    """``node`` with name references replaced (see ``NameReplacer``)."""
    if any(type(n) in _SCOPES for n in descendants(node)):
        return node.visit(NameReplacer(replace))

    def transform(current: cst.CSTNode) -> cst.CSTNode:
        if isinstance(current, cst.Name):
            replacement = replace(current.value)
            return current if replacement is None else replacement
        return map_children(current, transform)

    return transform(node)


def rename(node: cst.CSTNode, mapping: dict[str, str]) -> cst.CSTNode:
    """Rename variables (references and binding targets) by ``mapping``."""
    if not mapping:
        return node
    return replace_names(node, lambda name: cst.Name(mapping[name]) if name in mapping else None)
