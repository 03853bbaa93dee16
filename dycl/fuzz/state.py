"""What of a model compiling must leave alone: a snapshot of its state and a comparison.

The snapshot holds every ``state_dict`` entry (values, cloned), the ``training`` flag of
every submodule, and each submodule's plain attributes of builtin data types (numbers,
strings, containers of them), deep-copied. Tensors inside such containers and other
objects (bound methods, submodules) are left out: they are either in the ``state_dict``
or not state a compiler could change by running ``forward``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch

# the fuzzer's oracle: written apart from dycl.model.model_state (which it checks), not shared with it
_PLAIN = (int, float, bool, str, type(None))


def _is_plain(value: Any) -> bool:
    if isinstance(value, _PLAIN):
        return True
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(_is_plain(item) for item in value)
    if isinstance(value, dict):
        return all(_is_plain(k) and _is_plain(v) for k, v in value.items())
    return False


@dataclass(frozen=True)
class ModelState:
    """A copy of what compiling must not change (see the module docstring)."""

    tensors: dict[str, torch.Tensor]
    training: dict[str, bool]
    attributes: dict[str, Any]

    @classmethod
    def of(cls, model: torch.nn.Module) -> ModelState:
        tensors = {name: value.detach().clone() for name, value in model.state_dict(keep_vars=True).items()}
        training = {name or "<model>": module.training for name, module in model.named_modules()}
        attributes = {}
        for name, module in model.named_modules():
            for attr, value in vars(module).items():
                if not attr.startswith("_") and attr != "training" and _is_plain(value):
                    attributes[f"{name or '<model>'}.{attr}"] = copy.deepcopy(value)
        return cls(tensors, training, attributes)

    def difference(self, later: ModelState) -> str | None:
        """None if ``later`` equals this state, else a description of the first difference."""
        for name, value in self.tensors.items():
            now = later.tensors.get(name)
            if now is None:
                return f"state_dict entry {name!r} disappeared"
            if now.shape != value.shape or not torch.equal(now, value):
                return f"state_dict entry {name!r} changed"
        added = sorted(set(later.tensors) - set(self.tensors))
        if added:
            return f"state_dict entry {added[0]!r} appeared"
        for name, flag in self.training.items():
            if later.training.get(name, flag) != flag:
                return f"{name}.training changed from {flag} to {later.training[name]}"
        for name, value in self.attributes.items():
            if name not in later.attributes or later.attributes[name] != value:
                return f"attribute {name} changed from {value!r:.60} to {later.attributes.get(name, '<deleted>')!r:.60}"
        return None
