"""The per-call checks of an in-process model, as one precomputed check.

A compiled model guards three things before every call: its weights
(``dycl.in_process.staleness.WeightGuard``), the globals and closure cells its code
read (``dycl.in_process.globals_guard.GlobalsGuard``) and the plain Python attributes
it folded (``dycl.in_process.config_guard.ConfigGuard``). Run one after another they
cost three Python calls, one generator-driven pass per guard and, for the folded
attributes, one Python function per attribute.

``CallGuard`` flattens what all three look at, once, at compile time:

- every slot that must still hold the same object, as ``(dict, key, object)``: a
  parameter or buffer in its module's ``_parameters``/``_buffers``, a global in its
  module's namespace, a folded attribute in its module's ``__dict__`` (where a plain
  attribute lives: ``nn.Module.__setattr__`` puts it there);
- the closure cells, by identity; the weights' summed version counters and data
  pointers, and their layouts (``dycl.in_process.tensor_layouts.LayoutCheck``: one native
  call where torch has it); the folded lists, dicts and sets, by contents;
- a fixed sample of the weights' bytes (``WeightGuard.sample``,
  ``dycl.in_process.weight_contents.ContentSample``): one numpy gather, compared with
  compile time, run only once the data pointers are found equal in the same call.

``check`` is one identity pass over all the slots (C loops, no Python per slot),
three C comparisons, the layout check and the gather. Guarantees: it refuses exactly what
the three guards refuse, with their errors. When the fast check sees any difference, the three guards run as before
and raise; if none does (a global rebound to an equal immutable value, ``N = 3`` again),
the slots are taken again as they are now, so the next call is fast once more (the
guards keep comparing with the values of compile time; the layout check is taken again too,
so a call in another mode, ``torch.inference_mode``, is slow once, not every time).

Assumes what the three guards assume. An attribute that is not in the module's
``__dict__``, or is shadowed by a data descriptor of its class, is read as
``ConfigGuard`` reads it (``getattr``), one Python call per such attribute.
"""

from __future__ import annotations

import itertools
import operator

import torch

from dycl.in_process.config_guard import ConfigGuard
from dycl.in_process.globals_guard import GlobalsGuard, _cell_value
from dycl.in_process.staleness import WeightGuard
from dycl.in_process.tensor_layouts import LayoutCheck

_MISSING = object()
_VERSION = operator.attrgetter("_version")
_DATA_PTR = torch.Tensor.const_data_ptr  # the read-only accessor: it never materializes a lazy (copy-on-write) clone


def _in_instance_dict(module: object, name: str) -> bool:
    """Whether ``getattr(module, name)`` is ``module.__dict__[name]`` (no data descriptor in between)."""
    if "." in name or name not in getattr(module, "__dict__", {}):
        return False
    descriptor = getattr(type(module), name, None)
    return not (hasattr(descriptor, "__set__") or hasattr(descriptor, "__delete__"))


class CallGuard:
    """One check before each call, refusing what ``weights``, ``globals_`` and ``config`` refuse."""

    def __init__(self, weights: WeightGuard | None, globals_: GlobalsGuard | None,
                 config: ConfigGuard | None) -> None:
        self._guards = tuple(guard for guard in (weights, globals_, config) if guard is not None)
        dicts: list[dict] = []
        keys: list[str] = []
        self._getters: tuple[tuple[operator.attrgetter, object], ...] = ()
        if weights is not None:
            dicts += weights._tables
            keys += weights._keys
        if globals_ is not None:
            dicts += globals_._namespaces
            keys += globals_._names
        if config is not None:
            fast = [position for position, read in enumerate(config._reads)
                    if _in_instance_dict(read.module, read.name)]
            dicts += [config._reads[position].module.__dict__ for position in fast]
            keys += [config._reads[position].name for position in fast]
            self._getters = tuple((config._getters[position], config._modules[position])
                                  for position in range(len(config)) if position not in set(fast))
        self._containers = config._containers if config is not None else ()
        self._dicts, self._keys = tuple(dicts), tuple(keys)
        self._cells = globals_._cells if globals_ is not None else ()
        self._tensors = weights._tensors if weights is not None else ()
        self._same_contents = weights.sample.same if weights is not None else _true
        self._take()

    def _take(self) -> None:
        """What the slots and cells hold now, the versions, pointers and layouts (one tuple: swapped at once)."""
        self._stamp = (tuple(map(dict.get, self._dicts, self._keys, itertools.repeat(_MISSING))),
                       tuple(map(_cell_value, self._cells)),
                       tuple(_attribute(getter, module) for getter, module in self._getters),
                       sum(map(_VERSION, self._tensors)), tuple(map(_DATA_PTR, self._tensors)),
                       LayoutCheck(self._tensors))

    def _slots_held(self, held: tuple) -> bool:
        try:  # getitem: a third cheaper than dict.get with a default (which a slot missing then needs)
            return all(map(operator.is_, map(operator.getitem, self._dicts, self._keys), held))
        except KeyError:
            return all(map(operator.is_, map(dict.get, self._dicts, self._keys, itertools.repeat(_MISSING)), held))

    def _unchanged(self) -> bool:
        held, cells, attributes, versions, pointers, layouts = self._stamp
        return (self._slots_held(held)
                and sum(map(_VERSION, self._tensors)) == versions
                and tuple(map(_DATA_PTR, self._tensors)) == pointers
                and layouts.same()
                and self._same_contents()  # after the pointers: it reads where they pointed at compile time
                and all(map(operator.is_, map(_cell_value, self._cells), cells))
                and all(_attribute(getter, module) is then for (getter, module), then in zip(self._getters, attributes))
                and all(value == contents for value, contents in self._containers))

    def check(self) -> None:
        """Raise the guards' error (weights, then globals, then config) if anything they watch changed."""
        if self._unchanged():
            return
        for guard in self._guards:
            guard.check()
        self._take()  # nothing they refuse: an equal value rebound


def _true() -> bool:
    return True


def _attribute(getter: operator.attrgetter, module: object) -> object:
    try:
        return getter(module)
    except AttributeError:
        return _MISSING


__all__ = ["CallGuard"]
