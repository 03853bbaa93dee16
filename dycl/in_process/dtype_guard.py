"""Detect torch's default dtype changed after compiling.

``torch.tensor(0.5)``, ``torch.arange(0., n)``, ``torch.zeros(shape)`` and ``torch.full(shape, 1.5)``
create tensors of ``torch.get_default_dtype()``, read by eager PyTorch on every call; the compiled
model created them with the dtype of compile time. After ``torch.set_default_dtype(torch.float64)``
eager returns float64 where the compiled model returned float32: a silent difference in dtype and
in values. ``DefaultDtypeGuard.check`` raises ``StaleDefaultDtypeError`` instead.

Assumes: the default dtype is changed through ``torch.set_default_dtype`` (``get_default_dtype``
returns one of torch's dtype singletons). It is refused whether or not this model creates such a
tensor (which no guard can tell cheaply for the paths the example did not take). The saved artifact
(``host.py``) always runs with the dtypes of compile time.
"""

from __future__ import annotations

import torch


class StaleDefaultDtypeError(RuntimeError):
    """``torch.get_default_dtype()`` differs from when the model was compiled."""


class DefaultDtypeGuard:
    """Raises on ``check()`` once ``torch.get_default_dtype()`` is not the dtype of compile time."""

    def __init__(self) -> None:
        self.dtype = torch.get_default_dtype()

    def check(self) -> None:
        """Raise ``StaleDefaultDtypeError`` if the default dtype changed since compiling."""
        now = torch.get_default_dtype()
        if now is not self.dtype:
            raise StaleDefaultDtypeError(
                f"torch.get_default_dtype() is {now}, and was {self.dtype} when the model was compiled: the "
                f"compiled model creates its tensors (torch.tensor(0.5), torch.arange(0., n)) as {self.dtype}, "
                f"where eager now creates them as {now}: call dycl.compile again under the new default, or set "
                f"it back with torch.set_default_dtype({self.dtype})")


__all__ = ["DefaultDtypeGuard", "StaleDefaultDtypeError"]
