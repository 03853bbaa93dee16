"""Detect the model's Python configuration changed after compiling.

Constant propagation folds the plain Python values it reads from the model's modules
(a threshold, a list of thresholds handed to an inference method, a dict of sizes:
``rewriter.config_reads``) into the compiled code. ``ConfigGuard`` remembers, for each,
the object the attribute held and a copy of a list's, dict's or set's contents; ``check``
runs before every in-process call and raises ``StaleConfigError`` naming the attribute
once one was rebound (``model.thresholds = [...]``, ``model.threshold = 0.5``) or a
container was changed in place (``model.thresholds[0] = 0.5``).

Assumes: the attributes are read and written through Python (``getattr``/``setattr``).
Module state that ``forward`` writes is never folded, so it is not here (``dycl.in_process.state_sync``
keeps it). The saved artifact (``host.py``) always runs with the values read at compile
time (``docs/usage.md``, what is frozen).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable

import torch

from dycl.rewriter.config_reads import ConfigRead

_MISSING = object()


class StaleConfigError(RuntimeError):
    """A Python value of the model that the compiled code folded was changed after compiling."""


class ConfigGuard:
    """Raises on ``check()`` once any recorded attribute holds another object or its contents changed."""

    def __init__(self, model: torch.nn.Module, reads: Iterable[ConfigRead]) -> None:
        self._paths = {id(module): f"model.{name}" if name else "model" for name, module in model.named_modules()}
        self._reads = tuple(reads)
        self._getters = tuple(operator.attrgetter(read.name) for read in self._reads)
        self._modules = tuple(read.module for read in self._reads)
        self._values = tuple(read.value for read in self._reads)
        self._containers = tuple((read.value, read.contents) for read in self._reads if read.contents is not None)

    def __len__(self) -> int:
        return len(self._reads)

    def _current(self, position: int) -> object:
        try:
            return self._getters[position](self._modules[position])
        except AttributeError:
            return _MISSING

    def _unchanged(self, position: int) -> bool:
        read, now = self._reads[position], self._current(position)
        then = read.value if read.contents is None else read.contents
        return type(now) is type(read.value) and bool(now == then)  # plain values: == compares contents

    def check(self) -> None:
        """Raise ``StaleConfigError`` if a recorded attribute changed since compiling."""
        if all(map(operator.is_, map(self._current, range(len(self._reads))), self._values)) and all(
                value == contents for value, contents in self._containers):
            return
        changed = [read for position, read in enumerate(self._reads) if not self._unchanged(position)]
        if changed:
            shown = "; ".join(f"{self._paths.get(id(read.module), type(read.module).__qualname__)}.{read.name}"
                              for read in changed[:3])
            more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
            raise StaleConfigError(f"a Python value of the model that dycl folded into the compiled code was "
                                   f"changed after dycl.compile: {shown}{more}; the compiled model would still "
                                   "use the value it had then: call dycl.compile again (or pass the value as "
                                   "a tensor input)")


__all__ = ["ConfigGuard", "StaleConfigError"]
