"""Data-dependent Python decisions made while a sub-DNN runs.

A sub-DNN is exported as one fixed graph, so every Python value it computes
from tensor *values* is frozen at the example's value: ``bool(t)`` (an ``if``
on a tensor inside a library function or an opaque helper), ``t.item()``,
``int(t)``/``float(t)``, ``range(t)`` (``__index__``), ``t.tolist()``,
``t.numpy()``, ``torch.equal``. The builder already moves such conversions out
of the statements it sees (``HCFGBuilder.split_conversions``); what remains
happens inside code dycl did not rewrite.

``DecisionRecorder`` is a ``TorchFunctionMode`` that watches one sub-DNN's run on
an example and records each such read with the Python frame that asked for it
(the innermost frame outside torch: the user's or the library's file:line).
It records and never raises, so the code runs exactly as in eager mode (a
library's ``try``/``except`` cannot swallow the finding); the caller decides.

Shape reads (``x.size(0)``, iterating a tensor) are not value reads in eager
mode; while the TorchScript exporter traces, shapes are tensors, and the same
recorder run around the export sees ``range(x.shape[0])`` (``__index__``) too
(``dycl.backends.onnx_export``).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

import torch
from dycl.hcfg.traced_shapes import reads_only_shapes
from dycl.rewriter.errors import SourceLocation
from torch.overrides import TorchFunctionMode

#: Tensor methods and torch functions that hand a tensor's value to Python
VALUE_READS = frozenset({"__bool__", "item", "__int__", "__float__", "__index__", "__complex__", "tolist",
                         "numpy", "__array__", "__contains__", "equal", "allclose", "is_nonzero"})

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_THIS_FILE = __file__


@dataclass(frozen=True)
class Decision:
    """One tensor value read by Python: ``what`` (``bool()``, ``.item()``, ...) at ``where``;
    ``shape_only``: read while the TorchScript tracer ran, of a value computed from
    shapes and constants only (``hcfg.traced_shapes``)."""

    what: str
    where: SourceLocation | None
    shape_only: bool = False


def _describe(name: str) -> str:
    dunder = {"__bool__": "bool()", "__int__": "int()", "__float__": "float()", "__index__": "an index (range(), "
              "list index, shape argument)", "__complex__": "complex()", "__array__": "numpy.asarray()",
              "__contains__": "`in`"}
    return dunder.get(name, f".{name}()" if name in {"item", "tolist", "numpy"} else f"torch.{name}()")


def _caller(inside_torch: bool) -> SourceLocation | None:
    """The innermost frame that is neither torch nor this module; None if the read
    is torch's own (its immediate caller is in torch) and ``inside_torch`` is False."""
    frame = sys._getframe(2)
    while frame is not None:
        path = frame.f_code.co_filename
        if path.startswith(_TORCH_DIR) and not inside_torch:
            return None
        if not path.startswith(_TORCH_DIR) and path != _THIS_FILE:
            return SourceLocation(path, frame.f_lineno)
        frame = frame.f_back
    return None


class DecisionRecorder(TorchFunctionMode):
    """Records every tensor value that Python code reads while the mode is active.

    ``inside_torch=False`` ignores reads made by torch's own code: while an exporter
    traces, torch reads tensors for its own bookkeeping (and shapes are tensors then)."""

    def __init__(self, inside_torch: bool = True) -> None:
        super().__init__()
        self.inside_torch = inside_torch
        self.decisions: list[Decision] = []
        # (tensor, its version, the bool it gave): kept alive so that ids are not reused
        self._decided: list[tuple[torch.Tensor, int, bool]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name not in VALUE_READS or not any(isinstance(a, torch.Tensor) for a in args):
            return func(*args, **(kwargs or {}))
        where = _caller(self.inside_torch)
        result = func(*args, **(kwargs or {}))
        if (where is not None or self.inside_torch) and not self._repeats_a_decision(name, args[0], result):
            self.decisions.append(Decision(_describe(name), where, reads_only_shapes(args[0])))
        if name == "__bool__" and isinstance(args[0], torch.Tensor):
            self._decided.append((args[0], args[0]._version, bool(result)))
        return result

    def _repeats_a_decision(self, name: str, tensor: Any, result: Any) -> bool:
        """Whether ``tensor.item()`` reads a bool this recorder already saw decided by
        ``bool()`` of the same, unchanged tensor (transformers' ``is_causal = q_len > 1
        and ...`` then ``is_causal.item()`` while tracing): no new decision."""
        if name != "item" or not isinstance(result, bool):
            return False
        return any(seen is tensor and version == tensor._version and outcome == result
                   for seen, version, outcome in self._decided)
