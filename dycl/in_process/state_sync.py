"""Module state between the user's model and the compiled host.

A ``forward`` that writes module state is compiled with that state threaded
through it (``rewriter.state_threading``): the host's ``_forward`` takes each
slot's value as an input and returns ``(outputs, final state)``. The host keeps
the state between calls (``Model.state``; a saved artifact starts from the values
stored with its constants as ``<parameter>@state``). The in-process model is tied
to the user's module instead: before each call it reads the slots from the module
and after it writes them back (``ModuleState``), so eager and compiled calls can
be interleaved and continue one sequence.

Guarantees: ``ModuleState.write`` copies a tensor of the slot's shape and dtype in
place under ``no_grad`` (the parameter or buffer object stays the one the user
holds) and assigns any other value (``StateSlot.write``); ``keys`` names the slots,
which the staleness guard does not count as changed weights (``dycl.in_process.staleness``).
Assumes: one in-process call at a time changes the state (``lock``).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.utils._pytree import tree_map

from dycl.rewriter.state_table import kind_of
from dycl.rewriter.state_threading import ThreadedState


def host_state(threaded: Sequence[ThreadedState]) -> tuple[tuple[str, str, str, Any], ...]:
    """The host's ``STATE`` table: ``(parameter, path, kind, literal)`` per slot; the literal is the
    value for a dict of numbers and a set, and the numbers in a list (``{index: number}``; the others are
    stored with the constants, ``initial_state``), and for a list's ``prior`` slot the list's
    parameter (the host passes the items it keeps for that list)."""
    lists = {state.slot.key: state.parameter for state in threaded if state.kind == "list"}
    return tuple((state.parameter, state.path, state.kind, _literal(state, lists)) for state in threaded)


def _literal(state: ThreadedState, lists: dict[tuple[int, str], str]) -> Any:
    if state.kind in ("dict", "set"):
        return state.slot.read()
    if state.kind == "list":
        return {i: item for i, item in enumerate(state.slot.read()) if not isinstance(item, torch.Tensor)}
    if state.kind == "prior":
        return lists[state.slot.key]
    return None


def initial_state(threaded: Sequence[ThreadedState]) -> dict[str, torch.Tensor]:
    """The constants that store each slot's value now (at compile time): ``<parameter>@state``, and
    ``<parameter>@state.<i>`` for the items of a list."""
    stored = {}
    for state in threaded:
        if state.kind == "assigned":  # an attribute the model creates: no value yet
            continue
        value = state.slot.read()
        if state.kind == "list":
            stored.update({f"{state.parameter}@state.{i}": item.cpu() for i, item in enumerate(value)
                           if isinstance(item, torch.Tensor)})  # numbers: in the STATE table (host_state)
        elif state.kind not in ("dict", "set", "prior"):  # a dict of numbers is written into the host's STATE table
            stored[f"{state.parameter}@state"] = value.cpu() if isinstance(value, torch.Tensor) else torch.tensor(value)
    return stored


def _items(items: list) -> collections.deque:
    """A list slot's items for the host to read: numbers as they are, tensors as arrays sharing their
    memory (only read). The check of the items' types runs at C speed: the list grows with every call."""
    if set(map(type, items)) <= {bool, int, float}:
        return collections.deque(items)
    return collections.deque(item.detach().cpu().numpy() if isinstance(item, torch.Tensor) else item for item in items)


class ModuleState:
    """The state slots of the user's ``model`` that the compiled model reads and writes."""

    def __init__(self, threaded: Sequence[ThreadedState]) -> None:
        self.threaded = tuple(threaded)
        self.lock = threading.Lock()

    @property
    def keys(self) -> frozenset[tuple[int, str]]:
        """``(id(module), attribute)`` of every slot."""
        return frozenset(state.slot.key for state in self.threaded)

    def read(self) -> dict[str, Any]:
        """The host's state from the module now: arrays (copies) and Python numbers."""
        current = {}
        for state in self.threaded:
            if state.kind == "assigned":  # created by the call, never read: the host starts it as None
                current[state.parameter] = None
                continue
            value = getattr(state.slot.module, state.slot.attribute)
            if state.kind == "list":  # the host returns the items one call appends: start from none
                if type(value) is not list:
                    raise TypeError(f"module state {state.path} holds a {type(value).__name__} now, but was "
                                    "compiled as a list: compile the model again")
                current[state.parameter] = []
                continue
            if state.kind == "length":  # the list's length when the call starts (rewriter.state_lists)
                current[state.parameter] = len(value)
                continue
            if state.kind == "prior":  # its items when the call starts, as the host keeps them
                current[state.parameter] = _items(value)
                continue
            if state.kind in ("dict", "set"):
                if type(value) is not {"dict": dict, "set": set}[state.kind]:
                    raise TypeError(f"module state {state.path} holds a {type(value).__name__} now, but was "
                                    f"compiled as a {state.kind}: compile the model again")
                current[state.parameter] = state.slot.read()
                continue
            if kind_of(value) != state.kind:
                raise TypeError(f"module state {state.path} holds a {type(value).__name__} now, but was compiled "
                                f"as a {state.kind}: compile the model again")
            current[state.parameter] = value.detach().cpu().numpy().copy() if state.kind == "tensor" else value
        return current

    def write(self, final: dict[str, Any]) -> None:
        """Write the state after a call back to the module."""
        for state in self.threaded:
            value = final[state.parameter]
            if state.kind == "list":
                value = [torch.from_numpy(item) if isinstance(item, np.ndarray) else item for item in value]
            elif state.kind == "assigned":  # whatever forward() assigned: its arrays as tensors
                value = tree_map(lambda item: torch.from_numpy(item) if isinstance(item, np.ndarray) else item, value)
            elif isinstance(value, np.ndarray):
                value = torch.from_numpy(value)
            state.slot.write(value)


__all__ = ["ModuleState", "host_state", "initial_state"]
