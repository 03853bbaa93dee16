"""Detect numpy arrays the compiled code read changed after compiling.

A model may hold constants as numpy arrays (``self.mean = np.array([...])``, a module-level
``MEAN = np.array([...])`` read in ``forward``); the compiled code folds their values at compile
time. Unlike a tensor, an array has no version counter, and unlike a plain list it has no
cheap ``==``, so neither the weight guard nor the globals and config guards see one written in
place (``MEAN[0] = 5.0``): the compiled model answered with the old values (20 of 20 inputs
wrong in the lead's hunt, s13). ``ArrayGuard`` records, for every array held in a module's
``__dict__`` and every array global the model's code names (``GlobalsGuard.array_reads``), the
slot and a copy of its bytes; ``check`` raises ``StaleConfigError`` (a module's) or
``StaleGlobalsError`` (a global) once a slot holds another object or the bytes differ.

Assumes: arrays of a size that one ``tobytes`` per call costs little (a normalisation constant,
a lookup table): the check copies and compares every byte on every call.
"""

from __future__ import annotations

import numpy as np
import torch

from dycl.in_process.config_guard import StaleConfigError
from dycl.in_process.globals_guard import GlobalRead, StaleGlobalsError

_MISSING = object()


class ArrayGuard:
    """Raises on ``check()`` once a recorded array slot holds another object or other bytes."""

    def __init__(self, model: torch.nn.Module, global_reads: tuple[tuple[dict, GlobalRead], ...] = ()) -> None:
        slots: list[tuple[dict, str, np.ndarray, str]] = []
        for prefix, module in model.named_modules():
            for name, value in vars(module).items():
                if type(value) is np.ndarray:
                    slots.append((vars(module), name, value, f"model.{prefix + '.' if prefix else ''}{name}"))
        self._modules = len(slots)
        slots += [(namespace, read.name, read.value, f"{read.name!r} in {read.where}")
                  for namespace, read in global_reads]
        self._slots = tuple(slots)
        self._bytes = tuple(array.tobytes() for _, _, array, _ in slots)

    def __len__(self) -> int:
        return len(self._slots)

    def same(self) -> bool:
        """Whether every slot holds its array with the bytes it had at compile time."""
        return all(table.get(name, _MISSING) is array and array.tobytes() == then
                   for (table, name, array, _), then in zip(self._slots, self._bytes))

    def check(self) -> None:
        """Raise if a recorded array was replaced or written in place."""
        if self.same():
            return
        changed = [(position, what) for position, ((table, name, array, what), then)
                   in enumerate(zip(self._slots, self._bytes))
                   if table.get(name, _MISSING) is not array or array.tobytes() != then]
        shown = "; ".join(what for _, what in changed[:3])
        if changed[0][0] < self._modules:
            raise StaleConfigError(f"a numpy array of the model that dycl folded into the compiled code was changed "
                                   f"after dycl.compile: {shown}; the compiled model would still use its old "
                                   "values: call dycl.compile again (or make it a buffer)")
        raise StaleGlobalsError(f"a global numpy array the model's code read was changed after dycl.compile: "
                                f"{shown}; the compiled model still uses its old values: call dycl.compile again "
                                "(or pass it as an input or a buffer)")


__all__ = ["ArrayGuard"]
