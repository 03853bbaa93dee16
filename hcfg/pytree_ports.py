"""Values to ports and back, with ``torch.utils._pytree`` (the layouts of ``hcfg.ports``).

``layout_of`` flattens a value with ``tree_flatten`` and classifies each leaf
(a tensor, a Python number, a static, a dataclass record); ``port_values``
gives the flat tensors of a value for a layout (a number as a 0-d tensor), and
``rebuild`` puts a value back together from flat tensors with
``tree_unflatten``. A dataclass is not a pytree node (registering the user's
class would change pytree for the whole process), so it is a *record* leaf
whose fields are flattened in turn; so is a *state object* (``hcfg.state_objects``:
a KV cache), whose fields are its instance attributes and whose bools are statics.

Assumed: statics are compiled in (``hcfg.ports``), so ``port_values`` and
``rebuild`` only check that a value still has its layout; a value whose layout
differs is a dycl bug (``variants_of`` refuses such joins first).
Guaranteed: ports come in ``tree_flatten`` order, the order the host's walker
(``hostgen.ports_runtime``) uses.
"""

from __future__ import annotations

import copy
import dataclasses
from collections import OrderedDict, defaultdict, namedtuple
from collections.abc import Iterator
from typing import Any

import torch
from dycl.hcfg.ports import Layout, Leaf, Record, Static
from dycl.hcfg.state_objects import attribute_names, is_state_object
from torch.utils import _pytree as pytree

_SCALARS = {bool: "bool", int: "int", float: "float"}
SCALAR_DTYPES = {"bool": torch.bool, "int": torch.int64, "float": torch.float32}
_STATIC_TYPES = (torch.device, torch.dtype, str, type(None))


class NotAPortValue(TypeError):
    """A leaf that is neither a tensor, a number, a static nor a dataclass (``value`` is it),
    or a container the host has no faithful form for; ``kind`` names its type."""

    def __init__(self, value: Any, kind: type | None = None) -> None:
        self.kind = kind or type(value)
        super().__init__(self.kind.__name__)
        self.value = value


# containers the host holds faithfully (``hostgen.port_trees``); Python's namedtuple and
# torch.Size nodes are kept: the host has a namedtuple stand-in, and a Size is a tuple. A
# registered dict subclass flattened to its values by key (a ``ModelOutput``) is a *mapping*:
# rebuilt as its class here, held by the host as a dict that also reads its keys as attributes
_PLAIN_NODES = (list, tuple, dict, OrderedDict, defaultdict, torch.Size, namedtuple, type(None))


def layout_of(value: Any, static_flags: bool = False) -> Layout:
    """The layout of ``value``; raises ``NotAPortValue`` for a leaf no port can carry.
    ``static_flags``: Python bools are compiled in (inside a state object)."""
    leaves, spec = pytree.tree_flatten(value)
    _check_nodes(spec, value)
    kinds = tuple(_leaf(leaf, static_flags) for leaf in leaves)
    return Layout(None if spec.is_leaf() else spec, kinds)


def _check_nodes(spec: pytree.TreeSpec, value: Any) -> None:
    if spec.is_leaf():
        return
    if spec.type not in _PLAIN_NODES and not is_keyed_mapping(spec):
        raise NotAPortValue(value, spec.type)
    for child in spec.children():
        _check_nodes(child, value)


def is_keyed_mapping(spec: pytree.TreeSpec) -> bool:
    """A registered dict subclass whose context is its keys, one per child (a ``ModelOutput``)."""
    keys = spec.context
    return (isinstance(spec.type, type) and issubclass(spec.type, dict) and isinstance(keys, (list, tuple))
            and len(keys) == spec.num_children and all(isinstance(key, str) for key in keys))


def _leaf(value: Any, static_flags: bool = False) -> Leaf:
    if isinstance(value, torch.Tensor):
        return "tensor"
    if type(value) is bool and static_flags:
        return Static(value)
    if type(value) in _SCALARS:
        return _SCALARS[type(value)]
    if isinstance(value, _STATIC_TYPES):
        return Static(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = tuple(f.name for f in dataclasses.fields(value))
        return Record(type(value), names, layout_of(tuple(getattr(value, name) for name in names), static_flags))
    if is_state_object(value):
        names = attribute_names(value)
        return Record(type(value), names, layout_of(tuple(getattr(value, name) for name in names), True))
    raise NotAPortValue(value)


def leaf_values(value: Any, layout: Layout) -> Iterator[Any]:
    """The port leaves of ``value`` (tensors and numbers) in port order."""
    leaves = [value] if layout.spec is None else pytree.tree_leaves(value)
    if len(leaves) != len(layout.leaves):
        raise ValueError(f"a value with {len(leaves)} leaves where {len(layout.leaves)} were compiled")
    for leaf, kind in zip(leaves, layout.leaves):
        if isinstance(kind, Record):
            yield from leaf_values(tuple(getattr(leaf, name) for name in kind.fields), kind.layout)
        elif isinstance(kind, str):
            yield leaf


def port_values(value: Any, layout: Layout) -> list[torch.Tensor]:
    """The flat tensors of ``value`` (a number as a 0-d tensor of its port's dtype)."""
    return [leaf if isinstance(leaf, torch.Tensor) else torch.tensor(leaf, dtype=SCALAR_DTYPES[_SCALARS[type(leaf)]])
            for leaf in leaf_values(value, layout)]


def rebuild(ports: Iterator[Any], layout: Layout) -> Any:
    """The value of ``layout`` whose port leaves are taken from ``ports`` (statics as compiled)."""
    leaves = []
    for kind in layout.leaves:
        if isinstance(kind, Static):
            leaves.append(kind.value)
        elif isinstance(kind, Record):
            fields = rebuild(ports, kind.layout)
            leaves.append(_record(kind, fields))
        else:
            leaves.append(next(ports))
    return leaves[0] if layout.spec is None else pytree.tree_unflatten(leaves, layout.spec)


def _record(kind: Record, fields: tuple[Any, ...]) -> Any:
    """An instance of the record's class holding ``fields``, made without running its
    ``__init__``/``__post_init__`` (they ran when the example object was made)."""
    instance = object.__new__(kind.cls)
    for name, value in zip(kind.fields, fields):
        object.__setattr__(instance, name, value)
    return instance


def snapshot(value: Any) -> Any:
    """``value`` with fresh containers and records around the same leaves: what a
    sub-DNN saw, kept safe from later in-place writes (``d[k] = v``, ``s.h = v``)."""
    def fresh(leaf: Any) -> Any:
        if dataclasses.is_dataclass(leaf) and not isinstance(leaf, type):
            leaf = copy.copy(leaf)
            for field in dataclasses.fields(leaf):
                object.__setattr__(leaf, field.name, snapshot(getattr(leaf, field.name)))
        elif is_state_object(leaf):  # a cache's layers are rewritten in place by the next call
            leaf = copy.copy(leaf)
            for name in attribute_names(leaf):
                object.__setattr__(leaf, name, snapshot(getattr(leaf, name)))
        return leaf

    return pytree.tree_map(fresh, value)


__all__ = ["NotAPortValue", "SCALAR_DTYPES", "is_keyed_mapping", "layout_of", "leaf_values", "port_values", "rebuild",
           "snapshot"]
