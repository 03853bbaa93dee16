"""Type questions about a Python number a sub-DNN receives, answered with the number's own type.

The host passes a sub-DNN's ``int``/``float``/``bool`` input as a number (``hcfg.ports``: a port of
that kind), but while a sub-DNN is traced for export the number is a 0-d tensor. ``isinstance(s, int)``
or ``type(s) is float`` in its statements would then ask the tensor, and the graph would keep the
answer False for every call: ``s = 2 if c else 0.5; x = x * s + isinstance(s, int)`` computed
``x * 2`` on the int path. Within one variant the number's type is fixed: a port's kind is the type of
every example that reaches it, and where the type differs between paths the host picks the variant by
it (``hcfg.variants.NUMBER_RANKS``). ``typed_number_questions`` therefore rewrites the argument of
``isinstance(s, ...)`` and ``type(s)`` to a stand-in of the port's type (``0``, ``0.0``, ``False``,
from the namespace), which answers as the number does in eager.

Assumes: a port's kind is the Python type of the value the host passes (``hcfg.ports``).
Guarantees: only calls of the builtins ``isinstance`` and ``type`` (not rebound in the sub-DNN nor
shadowed in its namespace) with one positional argument naming a number port change, in the statements
up to the one that rebinds the name (after it, its type is what that statement computed).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import libcst as cst

from dycl.hcfg.ports import Variant
from dycl.rewriter.walk import bound_names

#: a number port's kind -> a value of its Python type
_STAND_INS = {"int": 0, "float": 0.0, "bool": False}
_TYPE_QUESTIONS = ("isinstance", "type")


class _Questions(cst.CSTTransformer):
    def __init__(self, numbers: frozenset[str], asked: frozenset[str], holder: str) -> None:
        self.numbers = numbers
        self.asked = asked
        self.holder = holder

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if not (isinstance(updated.func, cst.Name) and updated.func.value in self.asked and updated.args):
            return updated
        first = updated.args[0]
        if first.star or first.keyword or not (isinstance(first.value, cst.Name) and first.value.value in self.numbers):
            return updated
        stand_in = cst.Subscript(cst.Name(self.holder), [cst.SubscriptElement(cst.Index(
            cst.SimpleString(repr(first.value.value))))])
        return updated.with_changes(args=[first.with_changes(value=stand_in), *updated.args[1:]])


def typed_number_questions(statements: Sequence[cst.SimpleStatementLine], variant: Variant,
                           namespace: dict[str, Any], local: set[str]) -> list[cst.SimpleStatementLine]:
    """``statements`` with each type question about a number port asked of a stand-in of its type;
    the stand-ins go in ``namespace`` (under a name not in it nor in ``local``) where one is asked."""
    ports = {name: _STAND_INS[layout.leaves[0]] for name, layout in zip(variant.sub.inputs, variant.input_layouts)
             if layout.is_port and layout.leaves[0] in _STAND_INS}
    asked = frozenset(name for name in _TYPE_QUESTIONS
                      if name not in local and namespace.get(name, getattr(builtins, name)) is getattr(builtins, name))
    if not ports or not asked:
        return list(statements)
    holder = "_dycl_number_types"
    while holder in namespace or holder in local:
        holder += "_"
    out, rebound = [], set()
    for statement in statements:  # a statement's value is read before its targets are bound
        numbers = frozenset(ports) - rebound
        out.append(statement.visit(_Questions(numbers, asked, holder)) if numbers else statement)
        rebound |= set(bound_names(statement))
    if any(not new.deep_equals(old) for new, old in zip(out, statements)):
        namespace[holder] = ports
    return out


__all__ = ["typed_number_questions"]
