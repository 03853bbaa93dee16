"""The user's example around ``dycl.compile``: compiling runs ``forward`` on copies.

Compiling runs the model's statements several times (rewriting, building the HCFG,
exploring every path, exporting every sub-DNN, describing the outputs, the self-check),
and a ``forward`` may update its arguments in place (``x.add_(1)``). ``copy_tensors``
gives those runs a copy of the example; ``ExampleSnapshot`` puts the copy's values back
after each stage, so that every stage starts from the example's values.

Assumes: the example is a pytree (``torch.utils._pytree``) of tensors and other values.
Guarantees: ``copy_tensors`` clones every tensor leaf (detached; one object shared by two
leaves stays one object in the copy) and keeps every other leaf as it is; after
``ExampleSnapshot.restore`` every tensor leaf holds the values it held at ``take``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import _pytree as pytree


def copy_tensors(value: Any) -> Any:
    """``value`` with every tensor cloned (see the module docstring)."""
    memo: dict[int, torch.Tensor] = {}

    def clone(leaf: Any) -> Any:
        if not isinstance(leaf, torch.Tensor):
            return leaf
        if id(leaf) not in memo:
            memo[id(leaf)] = leaf.detach().clone()
        return memo[id(leaf)]

    return pytree.tree_map(clone, value)


@dataclass
class ExampleSnapshot:
    """The values of an example's tensors, to put back after a stage changed them."""

    saved: list[tuple[torch.Tensor, int, torch.Tensor]]

    @classmethod
    def take(cls, value: Any) -> ExampleSnapshot:
        tensors = {id(leaf): leaf for leaf in pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor)}
        return cls([(tensor, tensor._version, tensor.detach().clone()) for tensor in tensors.values()])

    def restore(self) -> None:
        """Copy the saved values back into every tensor written since ``take``."""
        with torch.no_grad():
            for index, (tensor, version, values) in enumerate(self.saved):
                if tensor._version != version:
                    tensor.copy_(values)
                    self.saved[index] = (tensor, tensor._version, values)


__all__ = ["ExampleSnapshot", "copy_tensors"]
