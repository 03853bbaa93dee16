"""Whether reading an attribute of a module (a slot, ``__dict__``, a ``property``) may read module state.

``rewriter.state_table`` keeps the static evaluator from folding a read of a state slot
(``self.last_conf``, written by ``forward``). A ``property`` reads its slots inside its getter,
out of the evaluator's sight: ``self.confident`` (``return self.last_conf > 0.5``) was folded to
its value at compile time, and the compiled model kept answering with it while eager's changed
with every call (a silent wrong answer on the saved host).

``property_may_read_state`` answers True, so the read is left dynamic, when ``owner.<name>`` is a
``property`` (or ``functools.cached_property``) of its class whose getter — with the nested
functions and the functions outside torch it names as globals — names the attribute of any state
slot, or reads attributes by a computed name (``getattr``, ``__dict__``, ``vars``).

``attribute_may_read_state`` adds the other ways a static expression reaches a slot: the slot
itself, by name or by ``getattr(self, "last_conf")``, and ``self.__dict__["last_conf"]`` (both were
folded, the compiled model answering with the slot's compile-time value).

Assumes: a getter reaches module state only through the names its code loads.
Guarantees: never True for a plain attribute, a method or a property whose code names no slot.
"""

from __future__ import annotations

import functools
import inspect
import types
from typing import Any

import libcst as cst
from dycl.rewriter.code_names import DYNAMIC_ACCESS, names_reached
from dycl.rewriter.state_table import StateTable


def attribute_may_read_state(state: StateTable, owner: Any, name: str) -> bool:
    """Whether reading ``owner.<name>`` (also as ``getattr(owner, name)``) may read a slot of ``state``:
    the slot itself, a property over one, or the ``__dict__`` of a module that holds one."""
    if not state.slots:
        return False
    if state.holds(owner, name):
        return True
    if name == "__dict__":
        return any(slot.module_id == id(owner) for slot in state.slots.values())
    return property_may_read_state(state, owner, name)


def property_may_read_state(state: StateTable, owner: Any, name: str) -> bool:
    """Whether ``owner.<name>`` runs a getter that may read one of ``state``'s slots."""
    if not state.slots:
        return False
    member = inspect.getattr_static(type(owner), name, None)
    if isinstance(member, property):
        getter = member.fget
    elif isinstance(member, functools.cached_property):
        getter = member.func
    else:
        return False
    if not isinstance(getter, types.FunctionType):
        return True  # a getter we cannot read: assume it may
    slot_names = {slot.attribute for slot in state.slots.values()}
    names = names_reached([getter])
    return bool(names & (slot_names | DYNAMIC_ACCESS))


class LiteralGetattr(cst.CSTTransformer):
    """``getattr(x, "name")`` -> ``x.name`` (two arguments, an identifier that Python would not mangle),
    so that the state threading sees a slot read by name as the attribute chain it is."""

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if not (isinstance(updated.func, cst.Name) and updated.func.value == "getattr" and len(updated.args) == 2):
            return updated
        target, name = updated.args
        if target.star or name.star or target.keyword or name.keyword or not isinstance(name.value, cst.SimpleString):
            return updated
        text = name.value.evaluated_value
        if not isinstance(text, str) or not text.isidentifier() or (text.startswith("__") and not text.endswith("__")):
            return updated
        return cst.Attribute(target.value, cst.Name(text))


__all__ = ["LiteralGetattr", "attribute_may_read_state", "property_may_read_state"]
