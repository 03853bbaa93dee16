"""Questions about the tracer asked by code the exporter runs as it is: refused, since eager answers otherwise.

While ``torch.onnx.export`` traces a sub-DNN, ``torch.jit.is_tracing()``,
``torch._C._get_tracing_state()`` (and ``torch._C._is_tracing()``) and
``torch.onnx.is_in_onnx_export()`` answer "traced". A compiled model means what eager means
when the model is called normally, where they answer "not traced"; in the code dycl rewrites,
``rewriter.mode_predicates`` folds them so. User code that the trace runs as it is (a
submodule whose ``forward`` dycl does not rewrite, a helper it calls) and asks them puts into
the graph the branch eager never takes: a wrong answer on every input where the two branches
differ, and a silent one where the example is not such an input (``if not
torch.jit.is_tracing(): y = y.clamp(min=-2)`` in a submodule).

``TracerQuestions`` watches one export with a profile function on the exporting thread
(``sys.setprofile``; the export runs on the caller's thread): each call of one of those
functions whose caller is not torch's, an installed package's or dycl's own code is noted with
the caller's line, and ``refuse`` raises ``UnsupportedError`` at the first. Measured: BlockDrop's
59 sub-DNNs compile in 3.1-3.3 s with the watch and 3.1 s without (2-core machine).

Library code asks too, to keep its traced graph equal to its eager one (transformers' masks:
``hcfg.tracing_guards``); it is trusted as the rest of a library's traced code is
(``dycl.model.library``). A profiler the caller runs on this thread (``cProfile``) is paused for
the export and resumed after it (its ``enable``), as a thread has one profile function.
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any

import torch

from dycl.rewriter.errors import SourceLocation
from dycl.rewriter.user_code import in_library

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
#: Python functions that answer "traced" while the exporter traces (their code objects)
_PYTHON_QUESTIONS = {torch.jit.is_tracing.__code__: "torch.jit.is_tracing()",
                     torch.onnx.is_in_onnx_export.__code__: "torch.onnx.is_in_onnx_export()"}
#: built-in functions that do
_BUILTIN_QUESTIONS = {id(torch._C._get_tracing_state): "torch._C._get_tracing_state()",
                      id(torch._C._is_tracing): "torch._C._is_tracing()"}


def _asks_as_user(frame: types.FrameType | None) -> bool:
    """Whether ``frame`` runs code that is neither torch's, an installed package's nor dycl's."""
    if frame is None:
        return False
    path = frame.f_code.co_filename
    module = frame.f_globals.get("__name__", "") or ""
    return not (path.startswith(_TORCH_DIR) or in_library(path) or module == "dycl" or module.startswith("dycl."))


class TracerQuestions:
    """A context that notes each question about the tracer asked by user code while it is open
    (the module note); ``asked`` holds ``(question, caller's location)`` in call order."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, SourceLocation]] = []
        self._paused: Any = None

    def __enter__(self) -> TracerQuestions:
        self._paused = sys.getprofile()
        sys.setprofile(self._watch)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)
        if self._paused is not None:
            resume = getattr(self._paused, "enable", None)  # a C profiler (cProfile) resumes itself
            if resume is not None and not isinstance(self._paused, types.FunctionType | types.MethodType):
                resume()
            else:
                sys.setprofile(self._paused)

    def _watch(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if event == "call":
            question = _PYTHON_QUESTIONS.get(frame.f_code)
            caller = frame.f_back
        elif event == "c_call":
            question = _BUILTIN_QUESTIONS.get(id(arg))
            caller = frame
        else:
            return
        if question is not None and _asks_as_user(caller):
            self.asked.append((question, SourceLocation(caller.f_code.co_filename, caller.f_lineno)))


__all__ = ["TracerQuestions"]
