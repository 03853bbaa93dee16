"""Records at the model boundary: inputs and outputs whose structure holds objects that
are not pytree nodes, such as a Hugging Face KV cache.

Terms. A *record* is an object carried as its attributes: a state object
(``hcfg.state_objects``: ``DynamicCache`` holding a list of ``DynamicLayer``) or a dataclass
that is not a registered pytree node. A *structured value* is a pytree (tuples, lists,
dicts, registered nodes such as ``ModelOutput``) with at least one record among its leaves;
a record's fields are structured values in turn. ``Structure`` describes one: its
*skeleton*, a JSON value written into the manifest's call form and the host's ``CALL``:

=====================================  ============================================================
skeleton                               the value
=====================================  ============================================================
``"tensor"``                           an array: one flat input or output of the compiled model
``["static", v]``                      compiled in (a record's bool flag, ``None``, a string, a device
                                       as ``"cpu"``, a dtype as ``"float32"``, a class as its
                                       qualified name): must equal ``v``
``["bool"]``                           a bool field of a dataclass the model *returns*, which it may
                                       compute from data: a 0-d bool array in the compiled code,
                                       a Python bool in the plain form (``bool(array)``)
``["record", "Name", [[field, s]]]``   a record of class ``Name``, its fields in order
``["dict", [[key, s]]]``               a dict, or a dict-like node (a ``ModelOutput``)
``["list", [s]]``, ``["tuple", [s]]``  a list; a tuple or namedtuple
=====================================  ============================================================

The torch-free host holds a structured value in its *plain form*: arrays for tensors, the
static values as the skeleton writes them, ``{"record": "Name", "fields": {field: plain}}``
for a record, a dict, list or tuple for the nodes. The host returns a structured output in
that form and takes a structured input in it, checked against the skeleton
(``hostgen/host_runtime.py``: ``_structure_leaves``); in process ``host_form`` turns the
caller's objects into it and ``Structure.rebuild`` turns the host's output back into objects
of the example's classes (a record made with ``object.__new__`` and its attributes set, as
``copy.copy`` makes one).

Assumed: a record's state is its attributes (what ``hcfg.state_objects`` checks) and holds
tensors and statics only: ``structure_of`` gives None for a value with a Python number among
its leaves (the callers then keep their own handling and refusals). Guaranteed: leaves come
in one order everywhere (pytree order, a record's fields in attribute order), and
``port_leaves`` raises ``ValueError`` where a static differs from the compiled one, so a
path that computes another flag fails at compile time instead of being answered with the
example's. An output's dataclass bool fields are never compiled in (``structure_of(...,
returned=True)``): a flag such as ``confident=bool(p.max() > t)`` differs from call to call, so
it is carried as a value on every path (a literal flag is a constant of the compiled code).
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable
from typing import Any

import torch
from torch.utils import _pytree as pytree

from dycl.hcfg.state_objects import attribute_names, is_state_object

_STATIC_TYPES = (bool, str, type(None), torch.device, torch.dtype, type)


def is_record(value: Any) -> bool:
    """Whether ``value`` is carried as its attributes (see the module note)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return type(value) not in pytree.SUPPORTED_NODES
    return is_state_object(value)


def fields_of(record: Any) -> tuple[str, ...]:
    """A record's fields, in the order its leaves come."""
    if dataclasses.is_dataclass(record):
        return tuple(field.name for field in dataclasses.fields(record))
    return attribute_names(record)


def holds_record(value: Any) -> bool:
    """Whether ``value`` has a record among its pytree leaves."""
    return any(is_record(leaf) for leaf in pytree.tree_leaves(value))


@dataclasses.dataclass(frozen=True)
class Structure:
    """A structured value's form: ``skeleton`` (the module note) and the example's value,
    whose classes and statics ``rebuild`` gives back."""

    skeleton: Any
    template: Any = dataclasses.field(compare=False, repr=False)
    #: ``(parameter, key or None, plain path)``: an argument (a record) the example's forward returned
    #: itself, updated in place, at that path of the output's plain form (``returned_arguments``)
    returned: tuple = ()

    @property
    def count(self) -> int:
        """How many arrays the value has."""
        return sum(1 for _ in _tensor_paths(self.skeleton, ()))  # a computed bool is one 0-d array

    def leaf_names(self, prefix: str) -> list[str]:
        """A readable name per array: ``past_layers_0_keys``."""
        return [re.sub(r"\W", "_", "_".join([prefix, *map(str, path)])) for path in _tensor_paths(self.skeleton, ())]

    def port_leaves(self, value: Any) -> tuple[torch.Tensor, ...]:
        """The arrays of ``value`` (objects of the example's classes) in order; ``ValueError``
        where its structure or a static is not the compiled one."""
        return tuple(_object_leaves(value, self.skeleton, "value"))

    def build(self, *leaves: Any) -> Any:
        """A fresh value of the example's classes holding ``leaves`` (the arrays, in order)."""
        position = iter(leaves)
        return _build(self.template, self.skeleton, position)

    def rebuild(self, plain: Any) -> Any:
        """The objects of the plain form the host returned (arrays already tensors)."""
        return self.build(*plain_leaves(plain, self.skeleton))

    def plain_expression(self, names: list[str]) -> str:
        """Python source of the plain form whose arrays are the expressions ``names``."""
        return _expression(self.skeleton, iter(names))

    def describe(self) -> Any:
        """The manifest's ``output`` entry (``dycl.model.outputs.describe``'s style)."""
        return _describe(self.template, self.skeleton)


def structure_of(value: Any, returned: bool = False) -> Structure | None:
    """The structure of ``value`` when it holds a record and only tensors and statics; else None.
    ``returned``: ``value`` is the model's output, whose dataclass bool fields are computed
    (``["bool"]``, the module note)."""
    if not holds_record(value):
        return None
    try:
        skeleton = _skeleton(value, returned)
    except _NoForm:
        return None
    # the template keeps classes and statics, not the example's arrays (a prompt's whole cache)
    return Structure(skeleton, copy_records(value, lambda leaf: leaf.new_empty((0,)) if isinstance(
        leaf, torch.Tensor) else leaf))


class _NoForm(Exception):
    """A leaf or node the plain form has no place for (a Python number, a dict with non-string keys)."""


def _skeleton(value: Any, returned: bool = False) -> Any:
    if isinstance(value, torch.Tensor):
        return "tensor"
    if is_record(value):
        computed = returned and dataclasses.is_dataclass(value)
        return ["record", type(value).__name__, [
            [name, ["bool"] if computed and isinstance(field, bool) else _skeleton(field, returned)]
            for name, field in ((name, getattr(value, name)) for name in fields_of(value))]]
    if isinstance(value, _STATIC_TYPES):
        return ["static", _static(value)]
    leaves, spec = pytree.tree_flatten(value)
    if spec.is_leaf():
        raise _NoForm(type(value).__name__)
    children = _children(value, spec)
    if isinstance(children, dict):
        if not all(isinstance(key, str) for key in children):
            raise _NoForm("dict keys")
        return ["dict", [[key, _skeleton(child, returned)] for key, child in children.items()]]
    return ["list" if isinstance(value, list) else "tuple", [_skeleton(child, returned) for child in children]]


def _children(value: Any, spec: pytree.TreeSpec) -> dict | list:
    """One pytree level of ``value``: a dict of its children by key, or their list."""
    if isinstance(value, dict):
        return dict(value.items())
    if isinstance(value, (list, tuple)):
        return list(value)
    children, context = pytree.SUPPORTED_NODES[spec.type].flatten_fn(value)
    keys = context if isinstance(context, (list, tuple)) and len(context) == len(children) else None
    return dict(zip(keys, children)) if keys is not None and all(isinstance(k, str) for k in keys) else list(children)


def _static(value: Any) -> Any:
    if isinstance(value, torch.device):
        return str(value)
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    if isinstance(value, type):  # a cache's layer class
        return f"{value.__module__}.{value.__qualname__}"
    return value


def _tensor_paths(skeleton: Any, path: tuple) -> Any:
    if skeleton in ("tensor", ["bool"]):
        yield path
        return
    kind = skeleton[0]
    if kind == "static":
        return
    for key, child in _entries(skeleton):
        yield from _tensor_paths(child, (*path, key))


def _entries(skeleton: list) -> list[tuple[Any, Any]]:
    """``(key, child skeleton)`` of a node: a record's fields, a dict's keys, a sequence's positions."""
    if skeleton[0] == "record":
        return [(key, child) for key, child in skeleton[2]]
    if skeleton[0] == "dict":
        return [(key, child) for key, child in skeleton[1]]
    return list(enumerate(skeleton[1]))


def _object_leaves(value: Any, skeleton: Any, where: str) -> Any:
    """The arrays of ``value``, a structure of the example's classes."""
    if skeleton == "tensor":
        if not isinstance(value, torch.Tensor):
            raise ValueError(f"{where}: a {type(value).__name__} where the model was compiled for a tensor")
        yield value
        return
    kind = skeleton[0]
    if kind == "bool":
        yield _flag(value, where)
        return
    if kind == "static":
        same = isinstance(value, _STATIC_TYPES) and type(_static(value)) is type(skeleton[1])
        if not (same and _static(value) == skeleton[1]):
            raise ValueError(f"{where}: {value!r} where the model was compiled for {skeleton[1]!r}")
        return
    if kind == "record":
        if type(value).__name__ != skeleton[1]:
            raise ValueError(f"{where}: a {type(value).__name__} where the model was compiled for a {skeleton[1]}")
        for name, child in _entries(skeleton):
            yield from _object_leaves(getattr(value, name), child, f"{where}.{name}")
        return
    children = _children(value, pytree.tree_flatten(value)[1])
    entries = _entries(skeleton)
    keys = [key for key, _ in entries]
    got = list(children) if isinstance(children, dict) else list(range(len(children)))
    if got != keys:
        raise ValueError(f"{where}: items {got} where the model was compiled for {keys}")
    for key, child in entries:
        yield from _object_leaves(children[key], child, f"{where}[{key!r}]")


def _flag(value: Any, where: str) -> torch.Tensor:
    """A computed bool field as the compiled code returns it: a 0-d bool tensor."""
    if isinstance(value, bool):
        return torch.tensor(value)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.reshape(()).to(torch.bool)
    raise ValueError(f"{where}: {value!r} where the model was compiled for a bool")


def plain_leaves(plain: Any, skeleton: Any) -> list[Any]:
    """The arrays of a plain form (the host's output), in order (a computed bool as itself)."""
    if skeleton in ("tensor", ["bool"]):
        return [plain]
    kind = skeleton[0]
    if kind == "static":
        return []
    if kind == "record":
        plain = plain["fields"]
    return [leaf for key, child in _entries(skeleton) for leaf in plain_leaves(plain[key], child)]


def _build(template: Any, skeleton: Any, leaves: Any) -> Any:
    if skeleton == "tensor":
        return next(leaves)
    kind = skeleton[0]
    if kind == "bool":
        return bool(next(leaves))
    if kind == "static":
        return template
    if kind == "record":
        record = object.__new__(type(template))
        for name, child in _entries(skeleton):
            object.__setattr__(record, name, _build(getattr(template, name), child, leaves))
        return record
    spec = pytree.tree_flatten(template)[1]
    children = _children(template, spec)
    built = [_build(children[key], child, leaves) for key, child in _entries(skeleton)]
    # one level: rebuild the node with its children as they are (records stay leaves of pytree)
    return pytree.tree_unflatten(built, _one_level(spec, len(built)))


def _one_level(spec: pytree.TreeSpec, count: int) -> pytree.TreeSpec:
    """``spec``'s top node over ``count`` leaf children."""
    return pytree.TreeSpec(spec.type, spec.context, [pytree.treespec_leaf() for _ in range(count)])


def _expression(skeleton: Any, names: Any) -> str:
    if skeleton == "tensor":
        return next(names)
    kind = skeleton[0]
    if kind == "bool":
        return f"bool({next(names)})"
    if kind == "static":
        return repr(skeleton[1])
    if kind == "record":
        fields = ", ".join(f"{name!r}: {_expression(child, names)}" for name, child in _entries(skeleton))
        return f"{{'record': {skeleton[1]!r}, 'fields': {{{fields}}}}}"
    if kind == "dict":
        return "{" + ", ".join(f"{key!r}: {_expression(child, names)}" for key, child in _entries(skeleton)) + "}"
    terms = [_expression(child, names) for _, child in _entries(skeleton)]
    if kind == "list":
        return "[" + ", ".join(terms) + "]"
    return "(" + ", ".join(terms) + ("," if len(terms) == 1 else "") + ")"


def _describe(template: Any, skeleton: Any) -> Any:
    if skeleton == "tensor":
        return "leaf"
    kind = skeleton[0]
    if kind == "bool":
        return "bool"
    if kind == "static":
        return {"static": skeleton[1]}
    cls = type(template)
    node: dict[str, Any] = {"type": f"{cls.__module__}.{cls.__qualname__}",
                            "returned_as": "record" if kind == "record" else kind}
    if kind == "record":
        node["items"] = {name: _describe(getattr(template, name), child) for name, child in _entries(skeleton)}
        return node
    children = _children(template, pytree.tree_flatten(template)[1])
    described = {key: _describe(children[key], child) for key, child in _entries(skeleton)}
    node["items"] = described if kind == "dict" else list(described.values())
    return node


def host_form(value: Any) -> Any:
    """The plain form of a structured value the caller passes in process (arrays as numpy)."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if is_record(value):
        return {"record": type(value).__name__, "fields": {name: host_form(getattr(value, name))
                                                           for name in fields_of(value)}}
    if isinstance(value, (torch.device, torch.dtype, type)):
        return _static(value)
    if isinstance(value, list):
        return [host_form(item) for item in value]
    if isinstance(value, tuple):
        return tuple(host_form(item) for item in value)
    if isinstance(value, dict):
        return {key: host_form(item) for key, item in value.items()}
    return value


def returned_arguments(output: Any, structure: Structure, passed: dict[str, Any]) -> Structure:
    """``structure`` (of ``output``) with the arguments among ``passed`` (forward()'s arguments
    by parameter name, ``**kwargs`` as a dict) that ``output`` holds as the same objects."""
    candidates = [(name, None, value) for name, value in passed.items()] + [
        (name, key, item) for name, value in passed.items() if isinstance(value, dict) for key, item in value.items()]
    found = dict(_record_paths(output, structure.skeleton, ()))
    returned = tuple((name, key, list(found[id(value)])) for name, key, value in candidates
                     if is_record(value) and id(value) in found)
    return dataclasses.replace(structure, returned=returned)


def _record_paths(value: Any, skeleton: Any, path: tuple) -> Any:
    """``(id(record), its path in the plain form)`` of every record in ``value``."""
    if skeleton == "tensor" or skeleton[0] in ("static", "bool"):
        return
    if skeleton[0] == "record":
        yield id(value), path
        for name, child in _entries(skeleton):
            yield from _record_paths(getattr(value, name), child, (*path, "fields", name))
        return
    children = _children(value, pytree.tree_flatten(value)[1])
    for key, child in _entries(skeleton):
        yield from _record_paths(children[key], child, (*path, key))


def records_within(value: Any) -> Any:
    """Every record in ``value``, its fields' records after it."""
    for leaf in pytree.tree_leaves(value):
        if is_record(leaf):
            yield leaf
            yield from records_within([getattr(leaf, name) for name in fields_of(leaf)])


def copy_records(value: Any, leaf: Callable[[Any], Any]) -> Any:
    """``value`` with every record a fresh object (its lists and dicts fresh too) and every
    other leaf mapped by ``leaf``: what compiling runs the model on, so that a forward
    rebinding a cache's attributes leaves the caller's cache as it was."""
    def fresh(item: Any) -> Any:
        if not is_record(item):
            return leaf(item)
        record = copy.copy(item)
        for name in fields_of(item):
            object.__setattr__(record, name, pytree.tree_map(fresh, getattr(item, name)))
        return record

    return pytree.tree_map(fresh, value)


__all__ = ["Structure", "copy_records", "fields_of", "holds_record", "host_form", "is_record", "plain_leaves",
           "records_within", "returned_arguments", "structure_of"]
