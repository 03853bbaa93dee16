"""Detect weights changed after compiling.

A compiled model holds the parameters and buffers as they were at compile time
(exported into ONNX/TVM files, or hoisted into host constants), and so the tensors held as
plain module attributes (``self.mask = torch.tril(...)``, not registered as buffers; they live
in the module's ``__dict__``). ``WeightGuard`` records, for every such slot of the user's model,
which tensor
object fills it, that tensor's ``_version`` (bumped by every in-place write:
``add_``, ``copy_``, ``load_state_dict``, optimizer steps, writes through views),
its ``data_ptr`` (changed by ``.data = ...``), its ``layout`` (dtype, shape, strides,
conjugate and negative bits: ``.data = w.data.t()`` keeps the pointer and the version,
``dycl.in_process.tensor_layouts``) and a fixed sample of its bytes
(``dycl.in_process.weight_contents.ContentSample``). ``check`` compares them on every
call and raises ``StaleWeightsError`` naming the weights that differ.

The sample sees what the version counters cannot: a write through ``param.data`` (a
tensor with a version counter of its own), through a numpy view or through the storage.
Per call it catches any write that changes a sampled element (each tensor's first and
last element and evenly spread ones): every whole-tensor write of a nonzero change
(``.data.mul_(3)`` on a nonzero weight, ``zero_``, ``normal_``, ``copy_``, an EMA step).
A write confined to unsampled elements (one element in the middle, a pruning mask that
happens to keep every sampled element) is caught only by ``check_contents``, which
``dycl.check`` runs: it compares a hash of every byte with compile time. A write that
leaves the bytes as they were (restores them) is no change and is not refused.

Assumes: CPU strided weights for the contents (others are guarded by identity, version
and pointer only). ``contents=False`` (a backend that runs the live modules, which sees
such writes as eager does) leaves the contents out. Module-level globals are not checked;
the README says they are frozen at compile time. Slots named in ``state`` (``(id(module),
name)``: module state the compiled model reads and writes back,
``dycl.in_process.state_sync``) are not weights and not checked.
"""

from __future__ import annotations

import operator

import torch

from dycl.in_process.tensor_layouts import layout
from dycl.in_process.weight_contents import ContentDigest, ContentSample


class StaleWeightsError(RuntimeError):
    """The model's weights changed after it was compiled; the compiled model would use the old ones."""


_VERSION = operator.attrgetter("_version")
_DATA_PTR = torch.Tensor.const_data_ptr  # the read-only accessor: it never materializes a lazy (copy-on-write) clone


class WeightGuard:
    """Raises on ``check()`` once any parameter or buffer of ``model`` was written or replaced."""

    def __init__(self, model: torch.nn.Module, state: frozenset[tuple[int, str]] = frozenset(),
                 contents: bool = True) -> None:
        tables: list[dict] = []
        keys: list[str] = []
        tensors: list[torch.Tensor] = []
        self._names: list[str] = []
        for prefix, module in model.named_modules(remove_duplicate=False):
            dot = f"{prefix}." if prefix else ""
            # a plain tensor attribute (``self.shift = torch.tensor(...)``, no buffer) is folded like a weight
            for table in (module._parameters, module._buffers, module.__dict__):
                for name, tensor in table.items():
                    if table is module.__dict__ and not isinstance(tensor, torch.Tensor):
                        continue
                    # state forward() writes is an input of the compiled model, no weight (dycl.in_process.state_sync)
                    if tensor is not None and (id(module), name) not in state:
                        tables.append(table)
                        keys.append(name)
                        tensors.append(tensor)
                        self._names.append(dot + name)
        self._tables, self._keys, self._tensors = tuple(tables), tuple(keys), tuple(tensors)
        self._versions = tuple(map(_VERSION, tensors))
        self._layouts = tuple(map(layout, tensors))
        self._stamp = self._now()
        self.sample = ContentSample(tensors if contents else ())
        self._digest = ContentDigest(tensors if contents else ())

    def _now(self) -> tuple:
        # versions only grow, so their sum changes whenever any one does
        return sum(map(_VERSION, self._tensors)), tuple(map(_DATA_PTR, self._tensors))

    def _slots_held(self) -> bool:
        return all(map(operator.is_, map(dict.get, self._tables, self._keys), self._tensors))

    def check(self) -> None:
        """Raise ``StaleWeightsError`` if a slot, version, data pointer, layout or sampled element differs."""
        # the pointers first: only memory still where it was at compile time is sampled
        if (self._now() == self._stamp and self._slots_held() and tuple(map(layout, self._tensors)) == self._layouts
                and self.sample.same()):
            return
        pointers = self._stamp[1]
        changed = {position for position, (table, key, tensor, version, pointer, then) in
                   enumerate(zip(self._tables, self._keys, self._tensors, self._versions, pointers, self._layouts))
                   if table.get(key) is not tensor or tensor._version != version or tensor.const_data_ptr() != pointer
                   or layout(tensor) != then}
        if not any(tensor.const_data_ptr() != pointer for tensor, pointer in zip(self._tensors, pointers)):
            changed.update(self.sample.changed())
        self._refuse(changed)

    def check_contents(self) -> None:
        """``check``, then compare every byte of every weight with compile time (a hash each: not per call)."""
        self.check()
        self._refuse(set(self._digest.changed()))

    def _refuse(self, changed: set[int]) -> None:
        if not changed:
            return
        names = [self._names[position] for position in sorted(changed)]
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise StaleWeightsError(f"the model's weights changed after dycl.compile ({shown}); the compiled model "
                                "still computes with the old values: call dycl.compile again")
