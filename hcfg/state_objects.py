"""State objects: plain Python objects that hold tensors, carried across sub-DNN boundaries
as records of their instance attributes.

A library's state object — Hugging Face's KV caches (``DynamicCache`` holding a list of
``DynamicLayer`` with ``keys``/``values`` tensors), a user's ``class State: ...`` — is
what a model returns and takes back on the next call. It is not a pytree node (registering
the library's class would change pytree for the whole process, and transformers registers
its caches only for ``torch.export``), so ``hcfg.pytree_ports`` carries it as a *record*:
its class and the values of ``vars(obj)``, rebuilt inside the next sub-DNN with
``object.__new__`` and the same attributes, which is what ``copy.copy`` does for such a class.

An object is a state object when ``vars()`` is its whole state: an instance of a
class written in Python (not torch's, numpy's or an extension's) with no ``__slots__``
(but ``abc.ABC``'s empty ones) and no custom ``__getstate__``/``__setstate__``/
``__reduce__``/``__copy__``/``__getattr__``/``__getattribute__``/``__setattr__`` (those say
the state is more than its attributes), that is not a module, tensor, type, function or
registered pytree node. Its attributes must in turn be port values (``NotAPortValue``
otherwise, a clear refusal).

Guaranteed: a state object's Python bools (``is_initialized``, ``offloading``) are
compiled in as statics, not ports — library code decides on them in Python, which a
0-d tensor would turn into a data-dependent decision. The host checks each per call
against the compiled value, so a flag that differs is a clear error at that call, never
a graph run for another value; a flag a graph computes from data is a decision the
trace refuses, one it computes from sizes a condition the host checks
(``dycl.export.shape_guards``). Its ints and floats (a sliding window's running length) are
ports, as a dataclass's are: library code that decides on one is refused at export.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any

import torch
from torch.utils import _pytree as pytree

#: methods that say an object's state is more than its instance attributes
_CUSTOM_STATE = ("__getstate__", "__setstate__", "__reduce__", "__reduce_ex__", "__copy__", "__deepcopy__",
                 "__getattr__", "__getattribute__", "__setattr__", "__delattr__")
_FOREIGN = frozenset({"builtins", "torch", "numpy"})
_NOT_STATE = (torch.Tensor, torch.nn.Module, type, types.FunctionType, types.MethodType, types.ModuleType,
              types.BuiltinFunctionType)


def is_state_object(value: Any) -> bool:
    """Whether ``value`` is carried as a record of ``vars(value)`` (see the module note)."""
    cls = type(value)
    if isinstance(value, _NOT_STATE) or dataclasses.is_dataclass(value) or cls in pytree.SUPPORTED_NODES:
        return False
    if cls.__module__.partition(".")[0] in _FOREIGN or not any("__dict__" in vars(base) for base in cls.__mro__):
        return False  # a type of torch's, numpy's or C code's: its state is not its attributes
    for base in cls.__mro__[:-1]:  # object's own methods are the defaults
        if vars(base).get("__slots__", ()) or any(name in vars(base) for name in _CUSTOM_STATE):
            return False
    return True


def attribute_names(value: Any) -> tuple[str, ...]:
    """The attributes of a state object, in the order they were set."""
    return tuple(vars(value))


def holds_tensor(value: Any) -> bool:
    """Whether a state object holds a tensor somewhere in its attributes (lists, tuples, dicts
    and nested state objects followed)."""
    for leaf in pytree.tree_leaves(tuple(vars(value).values())):
        if isinstance(leaf, torch.Tensor) or (is_state_object(leaf) and holds_tensor(leaf)):
            return True
    return False


__all__ = ["attribute_names", "holds_tensor", "is_state_object"]
