"""The host's side of structured ports: values to flat arrays and back.

A compiled sub-DNN takes and returns flat arrays; a variable that is a list,
tuple, dict, namedtuple or dataclass of arrays and numbers is walked with its
*structure description* (``hcfg.ports.describe``, written into the host as the
``PORT_TREES`` table): a leaf is a port kind (``"tensor"``, ``"int"``,
``"float"``, ``"bool"``) or a compiled-in value (``["static", value]``,
``["device", "cpu"]``, ``["dtype", "float32"]``); a node is ``[kind, keys, children]``.

What the host holds where the model had a Python object:

=====================  ============================================================
the model had          the host holds
=====================  ============================================================
list, tuple, dict      the same (a ``torch.Size`` as a tuple, an ``OrderedDict`` as a dict)
namedtuple             a ``collections.namedtuple`` of the same name and fields
dataclass              a ``types.SimpleNamespace`` with the same fields
state object           the same (``hcfg.state_objects``: a KV cache; its numbers are statics)
``ModelOutput``        a ``HostMapping``: a dict whose keys also read as attributes
``torch.device``       a ``HostDevice``: its string (``"cpu"``), with ``.type`` and ``.index``
``torch.dtype``        a ``HostDtype``: its name (``"float32"``)
=====================  ============================================================

The stand-ins are classes of the host module, so the compiler can tell them
from the model's own values and refuse to hand one back as an output
(``dycl.artifact.outputs``).

Assumed: a value has the structure its description says (the compiler proved
one structure on every path); ``port_leaves`` checks lengths, keys and compiled-in
values anyway and raises ``PortStructureError`` (a ``ValueError``) rather than pass misplaced
arrays or run a graph compiled for another value. This module imports
only the standard library: its source is copied into every host that needs it.
"""

import collections as _collections
import types as _types

from dycl.hostgen.manifest import PortStructureError  # dycl only

_STAND_INS = {}
_STATICS = ("static", "device", "dtype")


class HostDevice(str):
    """A ``torch.device`` as the host holds it: its string, with ``.type`` and ``.index``."""

    @property
    def type(self):
        return self.partition(":")[0]

    @property
    def index(self):
        index = self.partition(":")[2]
        return int(index) if index else None


class HostDtype(str):
    """A ``torch.dtype`` as the host holds it: its name (``"float32"``)."""


class HostMapping(dict):
    """A registered dict subclass (a ``ModelOutput``) as the host holds it: its keys read as
    attributes too (``out.logits``); anything else the class had is not here."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def port_leaves(value, tree):
    """The arrays and numbers of ``value`` in port order."""
    if isinstance(tree, str):
        return [value]
    if tree[0] in _STATICS:
        _check_static(value, tree)
        return []
    kind, keys, children = tree
    if kind in ("dict", "mapping"):
        keys = keys[1:] if kind == "mapping" else keys
        if not isinstance(value, dict) or len(value) != len(keys) or any(key not in value for key in keys):
            given = (f"a dict with keys {sorted(value, key=repr)}" if isinstance(value, dict)
                     else f"a {type(value).__name__}")  # before `in`: on a list of arrays it compares arrays
            raise PortStructureError(f"{given} where the model was compiled for a dict with keys "
                                     f"{sorted(keys, key=repr)}")
        items = [value[key] for key in keys]
    elif kind in ("namedtuple", "record"):
        items = [getattr(value, field) for field in keys[1:]]
    else:
        items = list(value) if not isinstance(value, dict) and hasattr(value, "__iter__") else None
        if items is None:  # a dict would give its keys
            raise PortStructureError(f"a {type(value).__name__} where the model was compiled for a {kind} "
                                     f"of {len(children)}")
        if len(items) != len(children):
            raise PortStructureError(f"a {kind} of {len(items)} where the model was compiled for {len(children)}")
    return [leaf for item, child in zip(items, children) for leaf in port_leaves(item, child)]


def _check_static(value, tree):
    """A compiled-in value is the one the sub-DNN was compiled for: any other (a string the
    host computed from data, ``"relu" if ... else "tanh"``) would run the wrong graph."""
    same = value is tree[1] or value == tree[1]
    if not (same is True or (isinstance(same, bool) and same)):
        raise PortStructureError(f"{value!r} where the model was compiled for {tree[1]!r}: this input takes a "
                                 "path dycl did not compile (a Python value computed from data chose it)")


def build_values(arrays, trees):
    """The values of ``trees`` (one per variable) from a sub-DNN's flat outputs."""
    position = iter(arrays)
    return tuple(_build(position, tree) for tree in trees)


def _build(position, tree):
    if isinstance(tree, str):
        value = next(position)
        return value if tree == "tensor" else value.item()
    if tree[0] in _STATICS:
        return HostDevice(tree[1]) if tree[0] == "device" else HostDtype(tree[1]) if tree[0] == "dtype" else tree[1]
    kind, keys, children = tree
    items = [_build(position, child) for child in children]
    if kind == "list":
        return items
    if kind == "tuple":
        return tuple(items)
    if kind == "dict":
        return dict(zip(keys, items))
    if kind == "mapping":
        return HostMapping(zip(keys[1:], items))
    if kind == "record":
        return _types.SimpleNamespace(**dict(zip(keys[1:], items)))
    name, fields = keys[0], tuple(keys[1:])
    if (name, fields) not in _STAND_INS:
        _STAND_INS[name, fields] = _collections.namedtuple(name, fields)
    return _STAND_INS[name, fields](*items)
