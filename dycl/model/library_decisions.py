"""Which installed-library functions to rewrite like user code: those whose trace would bake
a decision on data.

dycl traces library code into one graph, where a Python decision on a tensor's value
(``if expert_idx == self.num_experts: continue`` in transformers' experts loop) would
keep the example's outcome; the trace refuses it at the library's line
(``hcfg.decisions``). ``dycl.compiler.compile_model`` then compiles again, following that
code: the rewriter looks into exactly the functions ``to_follow`` returns
(``RewriteContext.followed``), with the same passes as user code; the rest of the library
stays traced. Library code that reads values in eager mode only (transformers skips its
packed-sequence check while tracing) is not followed: only a line the trace refused is.

Which functions: the library function that decided and every library function, decorator
wrappers included, that leads to it from the model's code (``rewriter.user_code.library_callers``).
Two sources, tried in order:

1. the refusal's own stack (``FrozenDecisionError.library_code``): the frames the trace of
   that sub-DNN ran through when the value was read, on whichever path the exploration ran
   it, so a line the example does not reach eagerly (a branch only another input takes) is
   followed too;
2. for a refusal that carries none (one raised while exporting a graph), ``deciders_at``:
   the model run once on the example, eagerly, watching every tensor value Python reads
   (``hcfg.decisions.VALUE_READS``: ``bool()``, ``.item()``, an index, ...); the frames on
   the stack at a read made at the refused line. This one assumes the example reaches that
   line eagerly (a line it does not reach gives nothing, and the refusal stands).

Guarantees: frames of torch, the standard library and dycl are never followed, nor frames
outside the compile (the caller of ``dycl.compile``); the eager run is
``dycl.model.example_run.run_on_example``'s, with the mode active for that one call only.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Mapping
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from dycl.hcfg.decisions import VALUE_READS, FrozenDecisionError
from dycl.model.example_run import run_on_example
from dycl.rewriter.errors import SourceLocation, UnsupportedError
from dycl.rewriter.user_code import followable, library_callers

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


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
        innermost = frame  # the reader: the innermost frame outside torch and this module
        while innermost is not None and innermost is not self.outer and (
                innermost.f_code.co_filename.startswith(_TORCH_DIR) or innermost.f_code.co_filename == __file__):
            innermost = innermost.f_back
        if innermost is None or innermost is self.outer or (innermost.f_code.co_filename, innermost.f_lineno) != (
                self.location.path, self.location.line):
            return  # torch's own read, or another line's
        self.followed.update(library_callers(frame, self.outer))


def to_follow(model: torch.nn.Module, args: tuple, kwargs: Mapping[str, Any] | None,
              refusal: UnsupportedError) -> frozenset[types.CodeType]:
    """The library functions to follow so that ``refusal``'s decision is rewritten (module
    note): those on its own stack where it carries them, else ``deciders_at``'s."""
    if isinstance(refusal, FrozenDecisionError) and refusal.library_code:
        return refusal.library_code
    return deciders_at(model, args, kwargs, refusal.location)


def deciders_at(model: torch.nn.Module, args: tuple, kwargs: Mapping[str, Any] | None,
                location: SourceLocation | None) -> frozenset[types.CodeType]:
    """The library functions to follow so that the decision at ``location`` (a line the
    trace refused) is rewritten (module note); empty where it is not a library's line."""
    if location is None or not followable(location.path):
        return frozenset()
    reads = _LibraryReads(location)
    reads.outer = sys._getframe()
    try:
        with reads:
            run_on_example(model, args, kwargs)
    except Exception:  # noqa: BLE001 - the refusal stands; the run's own failure is not the user's question
        return frozenset()
    return frozenset(reads.followed)


__all__ = ["deciders_at", "to_follow"]
