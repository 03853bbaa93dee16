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

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.utils._pytree import tree_map

from dycl.rewriter.state_table import kind_of
from dycl.rewriter.state_threading import ThreadedState


def host_state(threaded: Sequence[ThreadedState]) -> tuple[tuple[str, str, str, Any], ...]:
    """The host's ``STATE`` table: ``(parameter, path, kind, value now)`` per slot; the value only for
    a dict of numbers (a Python literal; the others are stored with the constants, ``initial_state``)."""
    return tuple((state.parameter, state.path, state.kind, state.slot.read() if state.kind == "dict" else None)
                 for state in threaded)


def initial_state(threaded: Sequence[ThreadedState]) -> dict[str, torch.Tensor]:
    """The constants that store each slot's value now (at compile time): ``<parameter>@state``, and
    ``<parameter>@state.<i>`` for the items of a list."""
    stored = {}
    for state in threaded:
        if state.kind == "assigned":  # an attribute the model creates: no value yet
            continue
        value = state.slot.read()
        if state.kind == "list":
            stored.update({f"{state.parameter}@state.{i}": item.cpu() for i, item in enumerate(value)})
        elif state.kind != "dict":  # a dict of numbers is written into the host's STATE table
            stored[f"{state.parameter}@state"] = value.cpu() if isinstance(value, torch.Tensor) else torch.tensor(value)
    return stored


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
            if state.kind == "dict":
                if type(value) is not dict:
                    raise TypeError(f"module state {state.path} holds a {type(value).__name__} now, but was "
                                    "compiled as a dict: compile the model again")
                current[state.parameter] = dict(value)
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
