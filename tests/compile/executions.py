"""A test-only counter of the model's executions per compile stage.

``count_executions(model, module)`` patches ``type(module).forward`` (for ``module``
only: other instances of the class run as before) and every stage of
``dycl.compiler.STAGES`` plus the two eager steps ``dycl.compile`` takes after them
(``batch_check`` and ``self_check``), and counts each call of ``module`` by what it
ran on: ``real`` tensors, ``fake`` tensors (symbolic shape propagation), or
``export`` (a tracer, while exporting a sub-DNN).
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections import Counter
from collections.abc import Iterator

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor

import dycl.api
import dycl.compiler


def _exporting() -> bool:
    """Whether ``torch.onnx.export`` is on the stack (found from the frames: code the exporter
    traces may not ask ``torch.jit.is_tracing()``, ``dycl.export.tracer_state``)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is torch.onnx.export.__code__:
            return True
        frame = frame.f_back
    return False


def _kind(args: tuple) -> str:
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if any(isinstance(t, FakeTensor) for t in tensors):
        return "fake"
    if _exporting() or torch.compiler.is_exporting() or torch.compiler.is_compiling():
        return "export"
    if any(type(t) is not torch.Tensor and not isinstance(t, torch.nn.Parameter) for t in tensors):
        return "export"  # a functional or proxy tensor: a tracer's
    return "real"


@contextlib.contextmanager
def count_executions(module: torch.nn.Module, monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter]:
    """Counts ``(stage, kind)`` of every call of ``module`` while the block runs."""
    counts: Counter = Counter()
    current = ["outside"]
    original = type(module).forward

    @functools.wraps(original)
    def forward(self, *args, **kwargs):
        if self is module:
            counts[current[0], _kind(args)] += 1
        return original(self, *args, **kwargs)

    def staged(name: str, function):
        @functools.wraps(function)
        def run(*args, **kwargs):
            outer, current[0] = current[0], name
            try:
                return function(*args, **kwargs)
            finally:
                current[0] = outer
        return run

    monkeypatch.setattr(type(module), "forward", forward)
    monkeypatch.setattr(dycl.compiler, "STAGES", tuple((name, staged(name, stage))
                                                       for name, stage in dycl.compiler.STAGES))
    monkeypatch.setattr(dycl.api, "static_batch_needed", staged("batch_check", dycl.api.static_batch_needed))
    monkeypatch.setattr(dycl.api, "_self_check", staged("self_check", dycl.api._self_check))
    yield counts


def first_leaf(model: torch.nn.Module) -> torch.nn.Module:
    """The first submodule without children (a convolution, a linear layer)."""
    return next(m for m in model.modules() if not list(m.children()))


def by_stage(counts: Counter) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {}
    for (stage, kind), number in counts.items():
        table.setdefault(stage, {})[kind] = number
    return table
