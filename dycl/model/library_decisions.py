"""Which installed-library functions to rewrite like user code: those whose trace would bake
a decision on data.

dycl traces library code into one graph, where a Python decision on a tensor's value
(``if expert_idx == self.num_experts: continue`` in transformers' experts loop) would
keep the example's outcome; the trace refuses it at the library's line
(``hcfg.decisions``). ``dycl.compiler.compile_model`` then compiles again, following that
code: ``deciders_at(model, ..., location)`` runs the model once on the example, eagerly,
watching every tensor value Python reads (``hcfg.decisions.VALUE_READS``: ``bool()``,
``.item()``, an index, ...), and for the reads made at the refused line returns the code
of every library frame on the stack at that moment: the function that decided and every
library function, decorator wrappers included, that leads to it from the model. The
rewriter looks into exactly those (``RewriteContext.followed``), with the same passes as
user code; the rest of the library stays traced. Library code that reads values in eager
mode only (transformers skips its packed-sequence check while tracing) is not followed:
only a line the trace refused is.

Assumes: the example reaches the refused line eagerly (a line it does not reach returns
nothing, and the refusal stands). Guarantees: the model runs as
``dycl.model.example_run.run_on_example`` runs it; frames of torch, the standard library and
dycl are never followed; the mode is active for that one call only.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Mapping
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from dycl.hcfg.decisions import VALUE_READS
from dycl.model.example_run import run_on_example
from dycl.rewriter.errors import SourceLocation
from dycl.rewriter.user_code import in_library, is_user_code

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_STDLIB = os.path.dirname(os.__file__) + os.sep


def _followable(path: str) -> bool:
    """An installed package's file (not torch's, not the standard library's)."""
    return in_library(path) and not path.startswith(_TORCH_DIR) and (
        not path.startswith(_STDLIB) or "-packages" + os.sep in path)


class _LibraryReads(TorchFunctionMode):
    def __init__(self, location: SourceLocation) -> None:
        super().__init__()
        self.location = location
        self.followed: set[types.CodeType] = set()
        self.outer: types.FrameType | None = None  # the frame that runs the model: the stack ends there

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        if getattr(func, "__name__", "") in VALUE_READS and any(isinstance(a, torch.Tensor) for a in args):
            self._record(sys._getframe(1))
        return func(*args, **(kwargs or {}))

    def _record(self, frame: types.FrameType | None) -> None:
        stack = []
        walk = frame
        while walk is not None and walk is not self.outer:
            stack.append(walk.f_code)
            walk = walk.f_back
        frames = []
        while frame is not None and frame is not self.outer:
            frames.append(frame)
            frame = frame.f_back
        innermost = next((f for f in frames if not f.f_code.co_filename.startswith(_TORCH_DIR)
                          and f.f_code.co_filename != __file__), None)
        if innermost is None or (innermost.f_code.co_filename, innermost.f_lineno) != (
                self.location.path, self.location.line):
            return  # torch's own read, or another line's
        self.followed.update(code for code in stack if _followable(code.co_filename))


def uses_library_modules(model: torch.nn.Module) -> bool:
    """Whether ``model`` holds a module whose class is neither the user's nor torch's."""
    return any(not is_user_code(type(m)) and (type(m).__module__ or "").split(".")[0] != "torch"
               for m in model.modules())


def deciders_at(model: torch.nn.Module, args: tuple, kwargs: Mapping[str, Any] | None,
                location: SourceLocation | None) -> frozenset[types.CodeType]:
    """The library functions to follow so that the decision at ``location`` (a line the
    trace refused) is rewritten (module note); empty where it is not a library's line."""
    if location is None or not _followable(location.path) or not uses_library_modules(model):
        return frozenset()
    reads = _LibraryReads(location)
    reads.outer = sys._getframe()
    try:
        with reads:
            run_on_example(model, args, kwargs)
    except Exception:  # noqa: BLE001 - the refusal stands; the run's own failure is not the user's question
        return frozenset()
    return frozenset(reads.followed)


__all__ = ["deciders_at", "uses_library_modules"]
