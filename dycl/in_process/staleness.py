"""Detect weights changed after compiling.

A compiled model holds the parameters and buffers as they were at compile time
(exported into ONNX/TVM files, or hoisted into host constants). ``WeightGuard``
records, for every parameter and buffer slot of the user's model, which tensor
object fills it, that tensor's ``_version`` (bumped by every in-place write:
``add_``, ``copy_``, ``load_state_dict``, optimizer steps, writes through views)
and its ``data_ptr`` (changed by ``.data = ...``). ``check`` compares them on
every call and raises ``StaleWeightsError`` when any differs.

Assumes: the weights are changed through torch, through tensors that share their
version counters (a write through ``param.data``, whose tensor has a version counter of
its own, through a numpy view of a parameter, or through raw memory, does not bump
``_version`` and is not seen: ``param.data.mul_(3)`` leaves the compiled model on the
old weights. Only a comparison of contents would see it, which costs a pass over every
weight per call).
Module-level globals are not checked; the README says they are frozen at compile
time. Slots named in ``state`` (``(id(module), name)``: module state the compiled
model reads and writes back, ``dycl.in_process.state_sync``) are not weights and not checked.
"""

from __future__ import annotations

import operator

import torch


class StaleWeightsError(RuntimeError):
    """The model's weights changed after it was compiled; the compiled model would use the old ones."""


_VERSION = operator.attrgetter("_version")
_DATA_PTR = torch.Tensor.data_ptr


class WeightGuard:
    """Raises on ``check()`` once any parameter or buffer of ``model`` was written or replaced."""

    def __init__(self, model: torch.nn.Module, state: frozenset[tuple[int, str]] = frozenset()) -> None:
        tables: list[dict] = []
        keys: list[str] = []
        tensors: list[torch.Tensor] = []
        self._names: list[str] = []
        for prefix, module in model.named_modules(remove_duplicate=False):
            dot = f"{prefix}." if prefix else ""
            for table in (module._parameters, module._buffers):
                for name, tensor in table.items():
                    # state forward() writes is an input of the compiled model, no weight (dycl.in_process.state_sync)
                    if tensor is not None and (id(module), name) not in state:
                        tables.append(table)
                        keys.append(name)
                        tensors.append(tensor)
                        self._names.append(dot + name)
        self._tables, self._keys, self._tensors = tuple(tables), tuple(keys), tuple(tensors)
        self._versions = tuple(map(_VERSION, tensors))
        self._stamp = self._now()

    def _now(self) -> tuple:
        # versions only grow, so their sum changes whenever any one does
        return sum(map(_VERSION, self._tensors)), tuple(map(_DATA_PTR, self._tensors))

    def _slots_held(self) -> bool:
        return all(map(operator.is_, map(dict.get, self._tables, self._keys), self._tensors))

    def check(self) -> None:
        if self._now() == self._stamp and self._slots_held():
            return
        pointers = self._stamp[1]
        changed = [name for name, table, key, tensor, version, pointer in
                   zip(self._names, self._tables, self._keys, self._tensors, self._versions, pointers)
                   if table.get(key) is not tensor or tensor._version != version or tensor.data_ptr() != pointer]
        shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        raise StaleWeightsError(f"the model's weights changed after dycl.compile ({shown}); the compiled model "
                                "still computes with the old values: call dycl.compile again")
