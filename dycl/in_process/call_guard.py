"""The per-call checks of an in-process model, as one precomputed check.

A compiled model guards six things before every call: its weights
(``dycl.in_process.staleness.WeightGuard``), the globals and closure cells its code
read (``dycl.in_process.globals_guard.GlobalsGuard``), the plain Python attributes
it folded (``dycl.in_process.config_guard.ConfigGuard``), its modules' arrangement, hooks
and torch layer settings (``dycl.in_process.structure_guard.StructureGuard``), torch's
default dtype (``dycl.in_process.dtype_guard.DefaultDtypeGuard``) and the numpy arrays it
folded (``dycl.in_process.array_guard.ArrayGuard``). Run one after another they
cost a Python call each, one generator-driven pass per guard and, for the folded
attributes, one Python function per attribute.

``CallGuard`` flattens what they look at, once, at compile time:

- every slot that must still hold the same object, as ``(dict, key, object)``: a
  parameter or buffer in its module's ``_parameters``/``_buffers``, a global in its
  module's namespace, a folded attribute in its module's ``__dict__`` (where a plain
  attribute lives: ``nn.Module.__setattr__`` puts it there), a child in its parent's
  ``_modules``, a torch layer's setting or instance ``forward`` in its ``__dict__``;
- the module ``__dict__``s that must hold no ``forward``; the hooks as two numbers
  (``StructureGuard.hook_stamp``); the default dtype, by identity;
- the closure cells, the functions' default tuples and the attributes of user classes read
  as globals (``globals_guard.class_attribute``), by identity; the summed version
  counters, the data pointers and the layouts (``dycl.in_process.tensor_layouts.LayoutCheck``:
  one native call where torch has it) of the weights and of the tensors read as globals or
  defaults; the folded lists, dicts and sets and the plain global ones, by contents;
- the numpy arrays of the modules and the globals, by their bytes (``dycl.in_process.array_guard``);
- a fixed sample of the weights' bytes (``WeightGuard.sample``,
  ``dycl.in_process.weight_contents.ContentSample``): one numpy gather, compared with
  compile time, run only once the data pointers are found equal in the same call.

``check`` is one identity pass over all the slots (C loops, no Python per slot),
a few C comparisons, the layout check and the gather. Guarantees: it refuses exactly what the
guards refuse, with their errors. When the fast check sees any difference, the guards run as before
and raise; if none does (a global rebound to an equal immutable value, ``N = 3`` again),
the slots are taken again as they are now, so the next call is fast once more (the
guards keep comparing with the values of compile time; the layout check is taken again too,
so a call in another mode, ``torch.inference_mode``, is slow once, not every time).

Assumes what the guards assume. An attribute that is not in the module's
``__dict__``, or is shadowed by a data descriptor of its class, is read as
``ConfigGuard`` reads it (``getattr``), one Python call per such attribute.
"""

from __future__ import annotations

import itertools
import operator

import torch

from dycl.in_process.array_guard import ArrayGuard
from dycl.in_process.config_guard import ConfigGuard
from dycl.in_process.dtype_guard import DefaultDtypeGuard
from dycl.in_process.globals_guard import GlobalsGuard, _cell_value, class_attribute
from dycl.in_process.staleness import WeightGuard
from dycl.in_process.structure_guard import StructureGuard
from dycl.in_process.tensor_layouts import LayoutCheck

_MISSING = object()
_VERSION = operator.attrgetter("_version")
_DEFAULTS = operator.attrgetter("__defaults__")
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
                 config: ConfigGuard | None, structure: StructureGuard | None = None,
                 dtype: DefaultDtypeGuard | None = None, arrays: ArrayGuard | None = None) -> None:
        self._guards = tuple(guard for guard in (weights, globals_, config, structure, dtype, arrays)
                             if guard is not None)
        self._arrays_same = arrays.same if arrays else _true
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
        if structure is not None:
            dicts += structure.dicts
            keys += structure.keys
        self._forward_absent = structure.forward_absent if structure is not None else ()
        self._hook_stamp = structure.hook_stamp if structure is not None else _no_hooks
        self._dtype = dtype.dtype if dtype is not None else None
        self._containers = ((config._containers if config is not None else ())
                            + (globals_.containers if globals_ is not None else ()))
        self._dicts, self._keys = tuple(dicts), tuple(keys)
        self._cells = globals_._cells if globals_ is not None else ()
        self._classes = globals_._classes if globals_ is not None else ()
        self._attributes = globals_._attributes if globals_ is not None else ()
        self._tensors = (*(weights._tensors if weights is not None else ()),
                         *(globals_.tensors if globals_ is not None else ()))
        self._with_defaults = globals_.with_defaults if globals_ is not None else ()
        self._defaults = globals_.defaults if globals_ is not None else ()
        self._same_contents = weights.sample.same if weights is not None else _true
        self._take()

    def _take(self) -> None:
        """What the slots and cells hold now, the versions, pointers and layouts (one tuple: swapped at once)."""
        self._stamp = (tuple(map(dict.get, self._dicts, self._keys, itertools.repeat(_MISSING))),
                       tuple(map(_cell_value, self._cells)),
                       tuple(_attribute(getter, module) for getter, module in self._getters),
                       sum(map(_VERSION, self._tensors)), tuple(map(_DATA_PTR, self._tensors)),
                       self._hook_stamp(), tuple(map(class_attribute, self._classes, self._attributes)),
                       LayoutCheck(self._tensors))

    def _slots_held(self, held: tuple) -> bool:
        try:  # getitem: a third cheaper than dict.get with a default (which a slot missing then needs)
            return all(map(operator.is_, map(operator.getitem, self._dicts, self._keys), held))
        except KeyError:
            return all(map(operator.is_, map(dict.get, self._dicts, self._keys, itertools.repeat(_MISSING)), held))

    def _unchanged(self) -> bool:
        held, cells, attributes, versions, pointers, hooks, class_attributes, layouts = self._stamp
        return (self._slots_held(held)
                and (self._dtype is None or torch.get_default_dtype() is self._dtype)
                and self._hook_stamp() == hooks
                and not any(map(operator.contains, self._forward_absent, itertools.repeat("forward")))
                and sum(map(_VERSION, self._tensors)) == versions
                and tuple(map(_DATA_PTR, self._tensors)) == pointers
                and layouts.same()
                and self._same_contents()  # after the pointers: it reads where they pointed at compile time
                and all(map(operator.is_, map(_cell_value, self._cells), cells))
                and all(map(operator.is_, map(_DEFAULTS, self._with_defaults), self._defaults))
                and all(map(operator.is_, map(class_attribute, self._classes, self._attributes), class_attributes))
                and all(_attribute(getter, module) is then for (getter, module), then in zip(self._getters, attributes))
                and all(value == contents for value, contents in self._containers)
                and self._arrays_same())

    def check(self) -> None:
        """Raise the guards' error (weights, globals, config, structure, then dtype) if anything they watch changed."""
        if self._unchanged():
            return
        for guard in self._guards:
            guard.check()
        self._take()  # nothing they refuse: an equal value rebound


def _true() -> bool:
    return True


def _no_hooks() -> None:
    return None


def _attribute(getter: operator.attrgetter, module: object) -> object:
    try:
        return getter(module)
    except AttributeError:
        return _MISSING


__all__ = ["CallGuard"]
