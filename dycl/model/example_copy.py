"""The user's example around ``dycl.compile``: compiling runs ``forward`` on copies.

Compiling runs the model's statements several times (rewriting, building the HCFG,
exploring every path, exporting every sub-DNN, describing the outputs, the self-check),
and a ``forward`` may update its arguments in place (``x.add_(1)``). ``copy_tensors``
gives those runs a copy of the example; ``ExampleSnapshot`` puts the copy's values back
after each stage, so that every stage starts from the example's values.

Assumes: the example is a pytree (``torch.utils._pytree``) of tensors and other values.
Guarantees: ``copy_tensors`` clones every tensor leaf (detached; one object shared by two
leaves stays one object in the copy), makes every record fresh (``dycl.model.records``: a KV
cache, whose attributes a forward rebinds) and keeps every other leaf as it is; after
``ExampleSnapshot.restore`` every tensor leaf holds the values it held at ``take``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils import _pytree as pytree

from dycl.model.records import copy_records, fields_of, records_within


def copy_tensors(value: Any) -> Any:
    """``value`` with every tensor cloned (see the module docstring)."""
    memo: dict[int, torch.Tensor] = {}

    def clone(leaf: Any) -> Any:
        if not isinstance(leaf, torch.Tensor):
            return leaf
        if id(leaf) not in memo:
            memo[id(leaf)] = leaf.detach().clone()
        return memo[id(leaf)]

    return copy_records(value, clone)


@dataclass
class ExampleSnapshot:
    """The values of an example's tensors, and the attributes of its records (a KV cache's
    layers, rebound by a forward), to put back after a stage changed them."""

    saved: list[tuple[torch.Tensor, int, torch.Tensor]]
    records: list[tuple[Any, dict[str, Any]]] = field(default_factory=list)

    @classmethod
    def take(cls, value: Any) -> ExampleSnapshot:
        found = list(records_within(value))
        leaves = [*pytree.tree_leaves(value), *(leaf for record in found for leaf in pytree.tree_leaves(
            [getattr(record, name) for name in fields_of(record)]))]
        tensors = {id(leaf): leaf for leaf in leaves if isinstance(leaf, torch.Tensor)}
        return cls([(tensor, tensor._version, tensor.detach().clone()) for tensor in tensors.values()],
                   [(record, _attributes(record)) for record in found])

    def restore(self) -> None:
        """Copy the saved values back into every tensor written since ``take``; give every
        record its attributes (and their lists' and dicts' items) back."""
        with torch.no_grad():
            for index, (tensor, version, values) in enumerate(self.saved):
                if tensor._version != version:
                    tensor.copy_(values)
                    self.saved[index] = (tensor, tensor._version, values)
        for record, attributes in self.records:
            for name in [name for name in vars(record) if name not in attributes]:
                object.__delattr__(record, name)
            for name, (value, items) in attributes.items():
                object.__setattr__(record, name, value)
                if isinstance(value, list):
                    value[:] = items
                elif isinstance(value, dict):
                    value.clear()
                    value.update(items)


def _attributes(record: Any) -> dict[str, tuple[Any, Any]]:
    """A record's attributes, each with a copy of its items where it is a list or dict."""
    return {name: (value, list(value) if isinstance(value, list) else dict(value) if isinstance(value, dict)
                   else None) for name, value in vars(record).items()}


__all__ = ["ExampleSnapshot", "copy_tensors"]
