"""Detect weights changed after compiling.

A compiled model holds the parameters and buffers as they were at compile time
(exported into ONNX/TVM files, or hoisted into host constants). ``WeightGuard``
records, for every parameter and buffer slot of the user's model, which tensor
object fills it, that tensor's ``_version`` (bumped by every in-place write:
``add_``, ``copy_``, ``load_state_dict``, optimizer steps, writes through views)
and its ``data_ptr`` (changed by ``.data = ...``). ``check`` compares them on
every call and raises ``StaleWeightsError`` when any differs.

Assumes: the weights are changed through torch (a write through a numpy view of
a parameter, or through raw memory, does not bump ``_version`` and is not seen).
Module-level globals are not checked; the README says they are frozen at compile
time.
"""

from __future__ import annotations

import torch


class StaleWeightsError(RuntimeError):
    """The model's weights changed after it was compiled; the compiled model would use the old ones."""


class WeightGuard:
    """Raises on ``check()`` once any parameter or buffer of ``model`` was written or replaced."""

    def __init__(self, model: torch.nn.Module) -> None:
        self._slots: list[tuple[dict, str]] = []
        tensors: list[torch.Tensor] = []
        self._names: list[str] = []
        for prefix, module in model.named_modules(remove_duplicate=False):
            dot = f"{prefix}." if prefix else ""
            for table in (module._parameters, module._buffers):
                for name, tensor in table.items():
                    if tensor is not None:
                        self._slots.append((table, name))
                        tensors.append(tensor)
                        self._names.append(dot + name)
        self._tensors = tuple(tensors)
        self._versions = self._now()

    def _now(self) -> tuple:
        return tuple((t._version, t.data_ptr()) for t in self._tensors)

    def check(self) -> None:
        if self._now() == self._versions and all(table.get(name) is tensor for (table, name), tensor
                                                  in zip(self._slots, self._tensors)):
            return
        changed = [name for name, (table, key), tensor, before in
                   zip(self._names, self._slots, self._tensors, self._versions)
                   if table.get(key) is not tensor or (tensor._version, tensor.data_ptr()) != before]
        shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        raise StaleWeightsError(f"the model's weights changed after dycl.compile ({shown}); the compiled model "
                                "still computes with the old values: call dycl.compile again")
