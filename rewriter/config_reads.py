"""The Python values of the model's modules that constant propagation read.

A threshold on the model (``self.threshold = 0.9``), a list of them passed to an
inference method (``self.adaptive_forward(x, self.thresholds)``), a dict of sizes:
constant propagation folds such values into the rewritten code, so the compiled model
computes with the values they had when ``dycl.compile`` ran. ``ConfigReads`` records
each one it read (module, attribute, value, and a copy of a container's contents), so
that the in-process model can refuse to run once one was rebound or changed in place
(``dycl.in_process.config_guard``) instead of silently computing with the old value.

A config object the modules hold (``self.config.hidden_act``, a dataclass or namespace shared by
the layers, as Hugging Face models hold theirs) is read the same way and recorded the same way:
``model.config.scale = 5.0`` after compiling changes eager as much as ``model.scale = 5.0``.

Assumes: the evaluator calls ``record`` for every attribute it reads of an object that
``holds_config`` accepts (a module, or an instance of a plain Python class).
Guarantees: ``reads()`` holds one ``ConfigRead`` per (object, attribute) whose value was a
plain Python value — ``None``, a bool, number or string, or a list, tuple, dict or set of
plain values (nested) — other than ``training`` (train/eval mode is checked on its own:
``dycl.model.model_state``); submodules, tensors, functions and objects are not recorded.
"""

from __future__ import annotations

import copy
import types
from dataclasses import dataclass, field
from typing import Any

import torch

_SCALARS = (bool, int, float, complex, str, bytes, type(None))
_CONTAINERS = (list, tuple, dict, set, frozenset)
_MUTABLE = (list, dict, set)


def is_plain(value: Any, depth: int = 0) -> bool:
    """A value with no tensor, module or other object inside (a config value)."""
    if isinstance(value, _SCALARS):
        return True
    if depth > 8 or type(value) not in _CONTAINERS:
        return False
    items = [*value.keys(), *value.values()] if isinstance(value, dict) else list(value)
    return all(is_plain(item, depth + 1) for item in items)


def holds_config(owner: Any) -> bool:
    """Whether ``owner``'s attributes are the model's configuration: a module, or an instance of a
    Python class that is no tensor, function, class or Python module (a config object)."""
    if isinstance(owner, torch.nn.Module):
        return True
    return (hasattr(owner, "__dict__") and not callable(owner)
            and not isinstance(owner, (torch.Tensor, type, types.ModuleType)))


@dataclass(frozen=True)
class ConfigRead:
    """``module.<name>`` held ``value`` (``contents``: a copy of a list's, dict's or set's items);
    ``module`` is a module of the model or a config object one holds."""

    module: Any = field(compare=False, repr=False)
    name: str
    value: Any = field(compare=False, repr=False)
    contents: Any = field(compare=False, repr=False)


@dataclass
class ConfigReads:
    """The plain values read from the model's modules during one ``rewrite``."""

    _found: dict[tuple[int, str], ConfigRead] = field(default_factory=dict)

    def record(self, module: Any, name: str, value: Any) -> None:
        if name == "training" or (id(module), name) in self._found or not is_plain(value):
            return
        contents = copy.deepcopy(value) if isinstance(value, _MUTABLE) else None
        self._found[(id(module), name)] = ConfigRead(module, name, value, contents)

    def reads(self) -> tuple[ConfigRead, ...]:
        return tuple(self._found.values())


__all__ = ["ConfigRead", "ConfigReads", "holds_config", "is_plain"]
