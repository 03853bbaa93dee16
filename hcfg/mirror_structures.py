"""Structured values in symbolic mirrors: dicts (a ``ModelOutput`` too), dataclasses and state objects.

``hcfg.symbolic`` mirrors a variable by its shapes (``SymbolicTensor``) and walks lists
and tuples itself. A KV cache (``hcfg.state_objects``) or a ``ModelOutput`` holding one
must be mirrored field by field too: otherwise its tensors keep the example's shapes and
the next sub-DNN is compiled for a cache of the prompt's length only. ``children`` gives
the parts of such a value and ``rebuilt`` the same kind of value around new parts.

Assumed: the values are the compiler's own copies (``hcfg.pytree_ports.snapshot``) or
mirrors; ``rebuilt`` never changes ``value``. A dict is copied with ``copy.copy`` (a
``ModelOutput`` keeps its class, and its keys stay its attributes) and its items set
again; a dataclass or a state object is made with ``object.__new__`` and its fields or
attributes set (no ``__init__``/``__post_init__``), as ``hcfg.pytree_ports.rebuild`` does.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from dycl.hcfg.state_objects import is_state_object


def is_structure(value: Any) -> bool:
    """A dict, a dataclass instance or a state object (lists and tuples are the caller's business)."""
    return isinstance(value, dict) or _is_record(value) or is_state_object(value)


def _is_record(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def children(value: Any) -> dict[Any, Any]:
    """The parts of a structure: a dict's items, a dataclass's fields, a state object's attributes."""
    if isinstance(value, dict):
        return dict(value)
    if _is_record(value):
        return {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
    return dict(vars(value))


def rebuilt(value: Any, parts: dict[Any, Any]) -> Any:
    """A structure of ``value``'s kind holding ``parts`` (``children``' keys)."""
    if isinstance(value, dict):
        new = copy.copy(value)
        for key, part in parts.items():
            new[key] = part
        return new
    new = object.__new__(type(value))
    for name, part in parts.items():
        object.__setattr__(new, name, part)
    return new


def same_kind(a: Any, b: Any) -> bool:
    """Two structures with one class and one set of parts."""
    return type(a) is type(b) and is_structure(a) and children(a).keys() == children(b).keys()


__all__ = ["children", "is_structure", "rebuilt", "same_kind"]
