"""Ports: the flat inputs and outputs a sub-DNN is compiled with, and how each
variable it reads or writes maps onto them.

A compiled sub-DNN takes and returns flat tensors. A variable crossing its
boundary is a *tree* (``torch.utils._pytree``: lists, tuples, dicts,
namedtuples; dataclass instances as records of their fields) whose leaves are

- a tensor: one port of kind ``"tensor"``;
- a Python ``bool``/``int``/``float``: one 0-d port of that kind (the host
  passes the number, and reads a returned one back with ``.item()``);
- a *static*: a value compiled in, with no port — a ``torch.device``, a
  ``torch.dtype``, ``None``, a string. The host keeps it as a plain Python
  value (``host_value``: a device by its string, a dtype by its name).

A ``Layout`` records one variable's tree: ``spec`` (a pytree ``TreeSpec``, or
None for a bare leaf) and its leaves in ``tree_flatten`` order. ``describe``
turns a layout into the JSON-able structure description the generated host
walks (the host cannot import torch, so it cannot use pytree): a leaf is its
port kind or ``["static", value]`` (``["device", "cpu"]``, ``["dtype", "float32"]``);
a node is ``[kind, keys, children]`` with kind ``"list"``, ``"tuple"``, ``"dict"``,
``"namedtuple"``, ``"record"`` (a dataclass or a state object) or ``"mapping"`` (a
registered dict subclass such as a ``ModelOutput``). What the host holds for each is listed in ``hostgen.port_trees``.

Assumed: every example reaching a sub-DNN has the same layout except for the
lengths of top-level lists (``Variant.key``); ``hcfg.variants`` checks this and
refuses a join whose paths disagree. Guaranteed: this module needs no torch.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict, defaultdict
from dataclasses import dataclass
from typing import Any

import libcst as cst
from dycl.hcfg.graph import SubDNN
from dycl.rewriter.vocabulary import dtype_name


@dataclass(frozen=True)
class Port:
    """One flat input or output: ``kind`` is "tensor" or the Python scalar type
    ("int", "float", "bool") it carries; symbolic dims are strings."""

    name: str
    kind: str
    dtype: str
    shape: tuple[int | str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "dtype": self.dtype, "shape": list(self.shape)}


@dataclass(frozen=True)
class Static:
    """A leaf compiled into the sub-DNN (no port)."""

    value: Any


@dataclass(frozen=True)
class Record:
    """A dataclass instance: its class, its field names and the layout of their values (a tuple)."""

    cls: type
    fields: tuple[str, ...]
    layout: Layout


Leaf = str | Static | Record  # a port kind ("tensor", "int", ...), a static, or a record


@dataclass(frozen=True)
class Layout:
    """How one variable's value maps onto ports (see the module note)."""

    spec: Any  # a pytree TreeSpec; None when the value is itself a leaf
    leaves: tuple[Leaf, ...]

    @property
    def port_count(self) -> int:
        return sum(_port_count(leaf) for leaf in self.leaves)

    @property
    def is_port(self) -> bool:
        """One tensor or scalar, passed as it is (no structure for the host to walk)."""
        return self.spec is None and len(self.leaves) == 1 and isinstance(self.leaves[0], str)

    @property
    def is_tensor_list(self) -> bool:
        """A top-level list of tensors: the host passes it with ``*name`` (see ``Variant.key``)."""
        spec = self.spec
        return (spec is not None and spec.type in (list, tuple) and spec.num_nodes == len(self.leaves) + 1
                and all(leaf == "tensor" for leaf in self.leaves))

    def signature(self) -> Any:
        """What must agree between two examples for one compiled form to serve both. A number or
        tensor inside a structure keeps its kind: the host picks a variant by the kind of a top-level
        port only (``hcfg.variants``), so ``(1, t)`` on one path and ``(0.5, t)`` on another disagree."""
        if self.is_port:
            return (str(self.spec), ("port",))
        return (str(self.spec), tuple(_leaf_signature(leaf) for leaf in self.leaves))


def _port_count(leaf: Leaf) -> int:
    if isinstance(leaf, str):
        return 1
    return leaf.layout.port_count if isinstance(leaf, Record) else 0


def _leaf_signature(leaf: Leaf) -> Any:
    if isinstance(leaf, Static):
        return ("static", type(leaf.value).__qualname__, repr(leaf.value))
    if isinstance(leaf, Record):
        return ("record", leaf.cls.__module__, leaf.cls.__qualname__, leaf.fields, leaf.layout.signature())
    # a top-level port's kind may differ between paths (``Layout.signature``): one variant per kind
    return ("port", leaf)


def host_value(value: Any) -> Any:
    """A static as the torch-free host holds it: a device by its string, a dtype by its name."""
    kind = type(value)
    if kind.__module__ == "torch" and kind.__name__ == "device":
        return str(value)
    if kind.__module__ == "torch" and kind.__name__ == "dtype":
        return dtype_name(value)
    return value


def describe(layout: Layout) -> Any:
    """The JSON-able structure description of ``layout`` for the host (see the module note)."""
    leaves = iter(layout.leaves)
    if layout.spec is None:
        return _describe_leaf(next(leaves))
    return _describe_node(layout.spec, leaves)


def _describe_leaf(leaf: Leaf) -> Any:
    if isinstance(leaf, Static):
        kind = type(leaf.value)
        torch_type = kind.__name__ if kind.__module__ == "torch" and kind.__name__ in ("device", "dtype") else None
        return [torch_type or "static", host_value(leaf.value)]
    if isinstance(leaf, Record):
        children = describe(leaf.layout)[2]
        return ["record", [leaf.cls.__name__, *leaf.fields], children]
    return leaf


_DICTS = (dict, OrderedDict, defaultdict)


def _describe_node(spec: Any, leaves: Any) -> Any:
    if spec.is_leaf():
        return _describe_leaf(next(leaves))
    if spec.type is type(None):
        return ["static", None]
    children = [_describe_node(child, leaves) for child in spec.children()]
    context = spec.context
    if spec.type is list:
        return ["list", [], children]
    if isinstance(spec.type, type) and issubclass(spec.type, dict) and spec.type not in _DICTS:
        return ["mapping", [spec.type.__name__, *context], children]  # a ModelOutput (hcfg.pytree_ports)
    if isinstance(spec.type, type) and issubclass(spec.type, dict):
        keys = context[1] if spec.type is defaultdict else context  # defaultdict: (factory, keys)
        return ["dict", list(keys), children]
    if isinstance(spec.type, type) and issubclass(spec.type, tuple) and context is None:
        return ["tuple", [], children]  # a tuple, or a torch.Size
    cls = context if isinstance(context, type) else spec.type  # a namedtuple's class is its context
    fields = getattr(cls, "_fields", None)
    if fields is not None:
        return ["namedtuple", [cls.__name__, *fields], children]
    raise ValueError(f"no host form for a {spec.type.__qualname__} node")


@dataclass(frozen=True)
class Variant:
    """One compilable form of a sub-DNN: ``key`` holds the lengths of its list
    inputs, then the ranks of its ``ranked`` inputs (the host picks the variant by
    ``len()`` and ``.ndim``), ``inputs``/``outputs`` its
    flat ports, ``input_layouts``/``output_layouts`` how each variable maps onto
    them, ``examples`` the flat example inputs it is compiled for."""

    sub: SubDNN
    key: tuple[int, ...]
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]
    examples: tuple[tuple[Any, ...], ...]
    input_layouts: tuple[Layout, ...]
    output_layouts: tuple[Layout, ...]
    #: inputs whose ranks follow the list lengths in ``key`` (their rank differs between paths)
    ranked: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        suffix = "_".join(str(k) for k in self.key)
        return f"{self.sub.name}_{suffix}" if self.key else self.sub.name

    def fingerprint(self) -> str:
        """Identical statements over identical input ports: the same compiled artifact."""
        text = cst.Module(list(self.sub.statements)).code
        body = "\n".join(_strip_comment(line) for line in text.splitlines())
        ports = repr([(p.kind, p.dtype, p.shape) for p in self.inputs]) + repr(
            [(p.kind, p.dtype, p.shape) for p in self.outputs])
        layouts = repr([layout.signature() for layout in (*self.input_layouts, *self.output_layouts)])
        signature = repr((self.sub.inputs, self.sub.outputs))
        return hashlib.sha256((body + ports + layouts + signature).encode()).hexdigest()[:16]

    @property
    def sizes_from_values(self) -> bool:
        """Whether a number it is given (a scalar port, or a 0-d tensor) may size an output: it
        takes one, and an output has a symbolic dim named by no input's dims (``h[:, :k]`` for an
        int port ``k``). A dim named afresh that the shapes do determine also counts (ports name
        their dims per port): the answer may be yes where the sizes follow the shapes, never no
        where they follow such a number."""
        if not any(port.kind != "tensor" or port.shape == () for port in self.inputs):
            return False
        known = {name for port in self.inputs for dim in port.shape if isinstance(dim, str)
                 for name in _symbols(dim)}
        return any(isinstance(dim, str) and not _symbols(dim) <= known for port in self.outputs for dim in port.shape)

    def output_variable(self, port: int) -> str:
        """The variable behind flat output ``port``."""
        names = [name for name, layout in zip(self.sub.outputs, self.output_layouts)
                 for _ in range(layout.port_count)]
        return names[port]


def _symbols(dim: str) -> set[str]:
    """The names in a symbolic dim (``s0 - k_1`` -> ``{s0, k_1}``), less the functions it applies."""
    return {name for name in re.findall(r"[A-Za-z_]\w*", dim) if name not in _DIM_FUNCTIONS}


_DIM_FUNCTIONS = frozenset({"Max", "Min", "floor", "ceiling", "FloorDiv", "Mod", "CeilDiv", "Abs", "sqrt"})


def _strip_comment(line: str) -> str:
    return line.split("  # ")[0].rstrip()


__all__ = ["Layout", "Port", "Record", "Static", "Variant", "describe", "host_value"]
