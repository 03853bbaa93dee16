"""Outputs as the framework returns them: ``ModelOutput``, dataclasses, namedtuples, dicts.

One mechanism: ``torch.utils._pytree``. The example's output is flattened into
its leaves and a ``TreeSpec``. The host returns the *plain* form of that tree —
a dict for every node with keys (``ModelOutput``, ``OrderedDict``, dict), a tuple
for every sequence node (namedtuple, tuple), a list for a list — which needs no
class the host cannot import; ``describe`` writes the tree into the manifest so
a torch-free caller knows what each entry was. In-process, ``rebuild`` turns the
plain form back into the framework's objects with the same ``TreeSpec``.

Assumed: the plain form's leaves come in the order ``tree_flatten`` gave them
(dicts keep insertion order, and ``plain_expression`` writes them in spec order).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree

from dycl.model.records import Structure


def flatten(value: Any) -> tuple[list[Any], pytree.TreeSpec]:
    return pytree.tree_flatten(value)


def is_plain(spec: pytree.TreeSpec) -> bool:
    """Whether the tree has only nodes the host returns as they are (tuple, list, dict)."""
    if spec.is_leaf() or spec.type is type(None):
        return True
    return spec.type in (tuple, list, dict) and all(is_plain(child) for child in spec.children())


def plain_expression(spec: pytree.TreeSpec, leaves: list[str]) -> str:
    """Python source of the plain form of ``spec`` whose leaves are the expressions ``leaves``."""
    position = iter(leaves)

    def walk(node: pytree.TreeSpec) -> str:
        if node.is_leaf():
            return next(position)
        if node.type is type(None):
            return "None"
        children = [walk(child) for child in node.children()]
        keys = _keys(node)
        if keys is not None:
            return "{" + ", ".join(f"{key!r}: {child}" for key, child in zip(keys, children)) + "}"
        if node.type is list:
            return "[" + ", ".join(children) + "]"
        return "(" + ", ".join(children) + ("," if len(children) == 1 else "") + ")"

    return walk(spec)


def _keys(node: pytree.TreeSpec) -> list[Any] | None:
    """The keys of a node with keys (dict-like, dataclass), else None."""
    context = node.context
    if node.type is dict or (isinstance(node.type, type) and issubclass(node.type, dict)):
        return list(context) if isinstance(context, (list, tuple)) else list(context[0]) if context else []
    if isinstance(context, (list, tuple)) and context and all(isinstance(k, str) for k in context) and (
            not (isinstance(node.type, type) and issubclass(node.type, tuple))):
        return list(context)
    return None


def describe(spec: pytree.TreeSpec | Structure) -> Any:
    """The tree as JSON: a leaf is ``"leaf"``; a node names its type and lists its children
    (a record is ``"returned_as": "record"``: ``dycl.model.records``)."""
    if isinstance(spec, Structure):
        return spec.describe()
    if spec.is_leaf():
        return "leaf"
    if spec.type is type(None):
        return None
    keys = _keys(spec)
    kind = spec.context if isinstance(spec.context, type) else spec.type  # a namedtuple's class is its context
    node: dict[str, Any] = {"type": f"{kind.__module__}.{kind.__qualname__}",
                            "returned_as": "dict" if keys is not None else ("list" if spec.type is list else "tuple")}
    children = [describe(child) for child in spec.children()]
    if keys is not None:
        node["items"] = {str(key): child for key, child in zip(keys, children)}
    else:
        node["items"] = children
    return node


def rebuild(plain: Any, spec: pytree.TreeSpec | Structure) -> Any:
    """The framework's objects from the plain form the host returned (``Structure``: an output
    holding records, ``dycl.model.records``)."""
    if isinstance(spec, Structure):
        return spec.rebuild(plain)
    if isinstance(plain, torch.Tensor) and spec.is_leaf():  # one tensor returned: itself (no pytree walk)
        return plain
    return pytree.tree_unflatten(pytree.tree_leaves(plain), spec)


__all__ = ["flatten", "is_plain", "plain_expression", "describe", "rebuild"]
