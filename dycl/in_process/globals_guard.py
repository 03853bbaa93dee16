"""Detect module globals and closure cells changed after compiling.

dycl folds what the model's code reads from its module's globals (``THRESHOLD =
0.5``, ``CONFIG["depth"]``, a helper function) into the compiled sub-DNNs and
host, as ``torch.compile`` does; ``torch.compile`` then guards those reads and
recompiles. ``GlobalsGuard`` records, for every user function the rewriter read
(``RewrittenFunction.functions``: the forward, the helpers and submodule
methods it inlined or proved branch-free, the module hooks it compiled), which
object each global name it uses denotes now, and which object fills each of its
closure cells, and the functions' default arguments (``def forward(self, x,
scale=SCALE)``: the compiled code holds the default it was compiled with);
``check`` raises ``StaleGlobalsError`` naming the global and its file once any
of them was rebound, or once a tensor among them (a global mask, a default
``scale``) was changed in place (its version counter or data pointer moved).

A class of the user's code is read through: a global that names one (``Scaled.scale``,
``Config.DEPTH``), and the class of each module whose method is among the functions
(``type(self).scale``, ``self.__class__.scale``; ``classes``): each name the function's code
uses that the class or a base of the user's defines (found in their ``__dict__``, so a
``classmethod`` is the same object on every check) is recorded too, and ``check`` raises once
``Scaled.scale = 2.0`` (on the class or a base, or shadowing it on a subclass) rebinds one.
A global list, dict or set of plain values (numbers, strings, nested plain containers) is
compared by contents too (a copy taken at compile time), so ``CONFIG["depth"] = 3`` is seen,
as ``dycl.in_process.config_guard`` sees a module attribute's container changed in place.

Assumes: a global is changed by rebinding it (``mod.THRESHOLD = 0.7``), for a tensor in place
through torch, or for a plain container in place. An in-place change of a container holding
other objects (modules, tensors, functions) is not seen; nor is ``__kwdefaults__`` replaced as a
whole. A
rebinding to an equal immutable value (``N = 3`` again, a fresh ``"relu"``)
is not a change. Calling ``check`` costs one dict lookup per recorded name when
nothing changed (``bench_check`` measures it).

The saved artifact (``host.py``) cannot see the user's globals at all: it runs
with the values read at compile time.
"""

from __future__ import annotations

import copy
import operator
import time
import types
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch

from dycl.in_process.tensor_layouts import layout
from dycl.rewriter.code_names import code_names
from dycl.rewriter.config_reads import is_plain
from dycl.rewriter.user_code import is_user_code

_MISSING = object()
_VERSION = operator.attrgetter("_version")
_DEFAULTS = operator.attrgetter("__defaults__")
_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), tuple, frozenset, range)


class StaleGlobalsError(RuntimeError):
    """A global (or closure variable) the model's code read was rebound after ``dycl.compile``."""


@dataclass(frozen=True)
class GlobalRead:
    """``name`` read from ``namespace`` (a function's ``__globals__`` or a closure cell) as ``value``."""

    where: str  # the file (or module name) that defines the global, for the message
    name: str
    value: object


def class_attribute(cls: type, name: str) -> object:
    """``name`` as the class ``cls`` defines it (the first ``__dict__`` in its MRO that has it, unbound)."""
    for klass in cls.__mro__:
        found = klass.__dict__.get(name, _MISSING)
        if found is not _MISSING:
            return found
    return _MISSING


def _defines(cls: type, function: types.FunctionType) -> bool:
    return any(vars(klass).get(function.__name__) is function for klass in cls.__mro__)


def _class_reads(function: types.FunctionType, classes: Iterable[type]) -> Iterable[tuple[type, GlobalRead]]:
    """The attributes of user classes that ``function`` reads: of the classes it names as globals
    and of those in ``classes`` that define it (see the module note)."""
    names = code_names(function.__code__)
    named = [function.__globals__.get(name) for name in sorted(names)]
    owners = [cls for cls in classes if _defines(cls, function)]
    for cls in {id(cls): cls for cls in [*named, *owners] if isinstance(cls, type) and is_user_code(cls)}.values():
        for attribute in sorted(names):
            value = class_attribute(cls, attribute)
            if value is not _MISSING and not attribute.startswith("__"):
                yield cls, GlobalRead(f"class {cls.__qualname__} ({_file_of(function.__globals__)})", attribute, value)


def _file_of(namespace: dict) -> str:
    return str(namespace.get("__file__") or namespace.get("__name__") or "<unknown module>")


def _function_reads(function: types.FunctionType) -> Iterable[tuple[object, object, GlobalRead]]:
    namespace = function.__globals__
    for name in sorted(code_names(function.__code__)):
        if name in namespace:
            yield namespace, name, GlobalRead(_file_of(namespace), name, namespace[name])
    keyword_defaults = function.__kwdefaults__ or {}
    for name, value in keyword_defaults.items():
        yield keyword_defaults, name, GlobalRead(f"the defaults of {function.__qualname__}", name, value)
    for name, cell in zip(function.__code__.co_freevars, function.__closure__ or ()):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell: nothing was read
            continue
        where = f"the closure of {function.__qualname__} ({function.__code__.co_filename})"
        yield cell, None, GlobalRead(where, name, value)


class GlobalsGuard:
    """Raises on ``check()`` once any global or closure cell the functions read was rebound."""

    def __init__(self, functions: Iterable[types.FunctionType], classes: Iterable[type] = ()) -> None:
        functions, classes = tuple(functions), tuple(classes)
        seen: set[tuple[int, object]] = set()
        namespaces: list[dict] = []
        cells: list[types.CellType] = []
        self._global_reads: list[GlobalRead] = []
        self._cell_reads: list[GlobalRead] = []
        for function in functions:
            for holder, name, read in _function_reads(function):
                if (id(holder), name) in seen:
                    continue
                seen.add((id(holder), name))
                if name is None:
                    cells.append(holder)
                    self._cell_reads.append(read)
                else:
                    namespaces.append(holder)
                    self._global_reads.append(read)
        attributes: dict[tuple[int, str], tuple[type, GlobalRead]] = {}
        for function in functions:
            for cls, read in _class_reads(function, classes):
                attributes.setdefault((id(cls), read.name), (cls, read))
        self._classes = tuple(cls for cls, _ in attributes.values())
        self._class_reads = tuple(read for _, read in attributes.values())
        self._attributes = tuple(read.name for read in self._class_reads)
        self._attribute_values = tuple(read.value for read in self._class_reads)
        #: (namespace, read) of the numpy arrays among the globals: ``dycl.in_process.array_guard`` compares their bytes
        self.array_reads = tuple((namespace, read) for namespace, read in zip(namespaces, self._global_reads)
                                 if type(read.value) is np.ndarray)
        #: (the global's container, a copy of its contents at compile time) for plain containers
        self.containers = tuple((read.value, copy.deepcopy(read.value)) for read in self._global_reads
                                if type(read.value) in (list, dict, set) and is_plain(read.value))
        self._namespaces = tuple(namespaces)
        self._names = tuple(read.name for read in self._global_reads)
        self._values = tuple(read.value for read in self._global_reads)
        self._cells = tuple(cells)
        self._cell_values = tuple(read.value for read in self._cell_reads)
        self.with_defaults = tuple(function for function in functions if function.__defaults__)
        self.defaults = tuple(function.__defaults__ for function in self.with_defaults)
        held = [*self._values, *self._cell_values, *(value for values in self.defaults for value in values)]
        self.tensors = tuple({id(value): value for value in held if isinstance(value, torch.Tensor)}.values())
        self._tensor_stamp = _tensor_stamp(self.tensors)

    def __len__(self) -> int:
        return len(self._names) + len(self._cells) + len(self._attributes)

    def check(self) -> None:
        """Raise ``StaleGlobalsError`` if a recorded global, cell or default now holds another value,
        or a tensor among them was changed in place."""
        if (all(map(operator.is_, map(dict.get, self._namespaces, self._names), self._values))
                and all(map(operator.is_, map(_cell_value, self._cells), self._cell_values))
                and all(map(operator.is_, map(_DEFAULTS, self.with_defaults), self.defaults))
                and _tensor_stamp(self.tensors) == self._tensor_stamp
                and all(map(operator.is_, map(class_attribute, self._classes, self._attributes),
                            self._attribute_values))
                and all(value == contents for value, contents in self.containers)):
            return
        changed = [read for namespace, read in zip(self._namespaces, self._global_reads)
                   if not _same(namespace.get(read.name, _MISSING), read.value)]
        changed += [read for cell, read in zip(self._cells, self._cell_reads)
                    if not _same(_cell_value(cell), read.value)]
        changed += [GlobalRead(function.__code__.co_filename, f"{function.__qualname__}.__defaults__", then)
                    for function, then in zip(self.with_defaults, self.defaults) if function.__defaults__ is not then]
        changed += [read for cls, read in zip(self._classes, self._class_reads)
                    if not _same(class_attribute(cls, read.name), read.value)]
        edited = {id(value) for value, contents in self.containers if value != contents}
        changed += [GlobalRead(read.where, f"{read.name} (changed in place)", read.value)
                    for read in self._global_reads if id(read.value) in edited]
        moved = {id(tensor) for tensor, now, then in zip(self.tensors, _tensor_stamp(self.tensors), self._tensor_stamp)
                 if now != then}
        changed += [read for read in (*self._global_reads, *self._cell_reads) if id(read.value) in moved]
        changed += [GlobalRead(function.__code__.co_filename, f"{function.__qualname__}.__defaults__", then)
                    for function, then in zip(self.with_defaults, self.defaults) if any(id(v) in moved for v in then)]
        if changed:
            shown = "; ".join(f"{read.name!r} in {read.where}" for read in changed[:3])
            more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
            raise StaleGlobalsError(f"a global the model's code read was changed after dycl.compile: {shown}{more}; "
                                    "the compiled model still uses the value it had then: call dycl.compile again "
                                    "(or pass the value as an input or a module attribute)")


def _tensor_stamp(tensors: tuple[torch.Tensor, ...]) -> tuple[tuple, ...]:
    """Each tensor's version counter, data pointer and layout: one of them moves when it is written in
    place or given another view of its memory (``t.data = t.data.t()`` keeps the pointer and the version)."""
    return tuple(zip(map(_VERSION, tensors), map(torch.Tensor.const_data_ptr, tensors), map(layout, tensors)))


def _cell_value(cell: types.CellType) -> object:
    try:
        return cell.cell_contents
    except ValueError:
        return _MISSING


def _same(now: object, then: object) -> bool:
    """Whether ``now`` denotes what ``then`` did: the same object, or an equal immutable value."""
    if now is then:
        return True
    if type(now) is not type(then) or not isinstance(then, _IMMUTABLE):
        return False
    try:
        return bool(now == then)
    except Exception:  # noqa: BLE001 - a tuple holding tensors: compare by identity only
        return False


def bench_check(guard: GlobalsGuard, calls: int = 100_000) -> float:
    """Seconds one ``guard.check()`` takes when nothing changed (the per-call cost)."""
    start = time.perf_counter()
    for _ in range(calls):
        guard.check()
    return (time.perf_counter() - start) / calls


__all__ = ["GlobalsGuard", "StaleGlobalsError", "GlobalRead", "bench_check"]
