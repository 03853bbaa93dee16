"""The module state a ``forward`` writes: the slots the rewrite threads through the compiled function.

A *state slot* is one attribute of one module instance of the model (``self.count``,
``self.inner.ema``, ``self.steps``, ``self.history``) that some method of the model may write. dycl
compiles such a slot the way ``torch.export`` compiles a buffer mutation: its value
is an input of the rewritten function and its final value an extra output
(``rewriter.state_threading``); the host keeps it between calls and the in-process
model writes it back (``dycl.in_process.state_sync``).

Guarantees: a slot is recorded with its kind (``tensor``, ``int``, ``float``,
``bool``, ``dict``: of such scalars, written by item, ``set``: of numbers and strings, changed
by its methods (``add``, ``discard``...), ``|=`` or assignment, or ``list``: a list of tensors
and Python numbers forward() appends to, or ``assigned``: an attribute forward() creates by assignment and
never reads); a list forward() also takes ``len()`` of
has a second slot of kind ``length`` on the same attribute: its length when the call
starts, an int the function takes (``rewriter.state_threading``); one forward() reads
items of has one of kind ``prior``: its items when the call starts, as a
``collections.deque``. Only the list's own slot writes back. The static evaluator never folds a read of a
recorded slot (its value at compile time is only its first value). The kinds in
``NOT_INPUTS`` are no input of the compiled function: it starts them afresh.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any

import torch

#: the kinds of slot the compiled function starts afresh (a list: the items appended; an attribute
#: created by the call: None until assigned), so not inputs of it
NOT_INPUTS = frozenset({"list", "assigned"})

#: the Python types of the values a state slot may hold, by kind (bool before int: bool is an int)
SCALAR_KINDS: tuple[tuple[type, str], ...] = ((bool, "bool"), (int, "int"), (float, "float"))


def is_list_item(value: Any) -> bool:
    """A value a list slot may hold: a tensor or a Python bool, int or float."""
    return isinstance(value, torch.Tensor) or type(value) in (bool, int, float)


def kind_of(value: Any) -> str | None:
    """``tensor``/``bool``/``int``/``float`` for a value a slot can hold, else None."""
    if isinstance(value, torch.Tensor):
        return "tensor"
    for python_type, kind in SCALAR_KINDS:
        if type(value) is python_type:
            return kind
    return None


@dataclass(frozen=True)
class StateSlot:
    """Attribute ``attribute`` of ``module`` (an ``nn.Module`` of the model), holding a ``kind`` value."""

    module: torch.nn.Module = field(compare=False, hash=False, repr=False)
    attribute: str
    kind: str
    module_id: int = 0

    @property
    def key(self) -> tuple[int, str]:
        return (self.module_id, self.attribute)

    def read(self) -> Any:
        """The slot's current value (a tensor as a detached copy; a list as a list of them; a length
        as the list's ``len``)."""
        value = getattr(self.module, self.attribute)
        if self.kind == "list":
            return [item.detach().clone() if isinstance(item, torch.Tensor) else item for item in value]
        if self.kind == "length":
            return len(value)
        if self.kind == "prior":  # a container no compiled part takes (rewriter.state_lists)
            return collections.deque(item.detach().clone() if isinstance(item, torch.Tensor) else item
                                     for item in value)
        if self.kind == "dict":
            return dict(value)
        if self.kind == "set":
            return set(value)
        return value.detach().clone() if isinstance(value, torch.Tensor) else value

    def write(self, value: Any) -> None:
        """Set the slot to ``value`` as ``forward`` would have (a list: append the items ``value``
        holds): a tensor of the slot's shape and dtype
        is copied in place (under ``no_grad``: the parameter or buffer object stays the same), any
        other value is assigned (a buffer rebound to a tensor of another shape stays a buffer)."""
        if self.kind == "assigned":  # None: the call did not assign it
            if value is not None:
                setattr(self.module, self.attribute, value)
            return
        current = getattr(self.module, self.attribute)
        if self.kind in ("length", "prior"):  # the list's own slot appends the items
            return
        if self.kind == "list":  # ``value``: the items one call appended
            current.extend(value)
            return
        if self.kind in ("dict", "set"):  # the user's dict or set object stays the same
            current.clear()
            current.update(value)
            return
        if isinstance(current, torch.Tensor) and isinstance(value, torch.Tensor) and (
                current.shape == value.shape and current.dtype == value.dtype):
            with torch.no_grad():
                current.copy_(value)
        elif self.kind != "tensor":
            setattr(self.module, self.attribute, value)
        elif self.attribute in self.module._parameters:
            self.module._parameters[self.attribute] = torch.nn.Parameter(value, current.requires_grad)
        else:
            setattr(self.module, self.attribute, value)


@dataclass
class StateTable:
    """The slots found so far (``rewriter.state_slots``), by ``(id(module), attribute)``."""

    slots: dict[tuple[int, str], StateSlot] = field(default_factory=dict)
    writers: set[Any] = field(default_factory=set)  # the functions that write a slot: always inlined

    def add(self, module: torch.nn.Module, attribute: str, kind: str) -> StateSlot:
        slot = StateSlot(module, attribute, kind, id(module))
        return self.slots.setdefault(slot.key, slot)

    def holds(self, owner: Any, attribute: str) -> bool:
        """Whether ``owner.attribute`` is a state slot (so not a compile-time constant)."""
        return (id(owner), attribute) in self.slots

    def reaches(self, module: Any) -> bool:
        """Whether ``module`` or one of its submodules holds a slot (calling it may read state)."""
        if not self.slots or not isinstance(module, torch.nn.Module):
            return False
        owners = {slot.module_id for slot in self.slots.values()}
        return any(id(inner) in owners for inner in module.modules())  # cheap: few modules hold state

    def get(self, owner: Any, attribute: str) -> StateSlot | None:
        return self.slots.get((id(owner), attribute))


__all__ = ["NOT_INPUTS", "SCALAR_KINDS", "StateSlot", "StateTable", "is_list_item", "kind_of"]
