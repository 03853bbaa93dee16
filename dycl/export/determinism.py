"""Refuse a sub-DNN whose eager statements give two answers on one input.

An exported graph keeps every value its trace computed outside torch as a constant:
``torch.from_numpy(np.random.randn(*x.shape))``, ``x + random.gauss(0, 1)``,
``x * (time.time() % 1)``, a counter in a closure. Eager computes such a value anew on
every call; the graph would answer every call with the example's draw, silently.
``refuse_nondeterminism`` runs the sub-DNN's statements twice on the variant's example
and refuses the graph when the two runs differ, at the user's line of the statement that
writes the first output that differed. Torch's own samplers are refused before this by
``dycl.backends.sampling`` with a message of their own; torch's generator state is
forked here so that the user's random stream is kept.

Uninitialised memory (``torch.empty``) is no draw: eager leaves whatever was there, and a
value read before being written is undefined, so both runs fill it with zeros.

Assumes: the statements are otherwise deterministic on CPU (torch's CPU kernels are,
run to run, for one input and thread count); an in-place update of an input reaches
only a copy (each run gets its own copies of the example).
Guarantees: a sub-DNN that passes gave bitwise the same outputs (NaN equal to NaN) on
two runs; one that does not raises ``UnsupportedError``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from dycl.rewriter.errors import UnsupportedError

_HINT = ("the compiled graph keeps the value the example's run computed: draw it outside the model and pass it "
         "in as an input (a value outside torch, like numpy's or Python's `random`, or the clock, is computed "
         "once when dycl traces the graph)")


def refuse_nondeterminism(module: Any, example: tuple[Any, ...]) -> None:
    """Raise ``UnsupportedError`` if ``module`` (a ``SubDNNModule``) gives different outputs on
    two runs on ``example`` (see the module docstring)."""
    first, second = _run(module, example), _run(module, example)
    if first is None or second is None:
        return  # the exporter's own checks report a sub-DNN that fails on its example
    for port, (a, b) in enumerate(zip(first, second)):
        if not _same(a, b):
            raise UnsupportedError("a value that differs from call to call (two runs on one input disagree) in "
                                   "compiled code", module.location_of(module.writer_of(port)), _HINT)


def _run(module: Any, example: tuple[Any, ...]) -> tuple[Any, ...] | None:
    copies = tuple(value.clone() if isinstance(value, torch.Tensor) else value for value in example)
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]), _ZeroedEmpty():
            return module(*copies)
    except Exception:  # noqa: BLE001 - the export reports it
        return None


#: functions that return uninitialised memory
_EMPTY = frozenset({"empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided"})


class _ZeroedEmpty(TorchFunctionMode):
    """``torch.empty`` and its kin return zeros (see the module docstring)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if getattr(func, "__name__", "") in _EMPTY and isinstance(result, torch.Tensor):
            result.zero_()
        return result


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b) or (
            a.is_floating_point() and torch.equal(a.isnan(), b.isnan())
            and torch.equal(a.masked_fill(a.isnan(), 0), b.masked_fill(b.isnan(), 0))))
    return type(a) is type(b) and (a == b or a != a and b != b)


__all__ = ["refuse_nondeterminism"]
