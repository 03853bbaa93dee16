"""Fresh hunt, family 24: code that asks whether it is being traced or exported
(``torch.jit.is_tracing()``, ``torch.onnx.is_in_onnx_export()``, ``torch._C._get_tracing_state()``),
in ``forward`` and in a submodule, as code written to be exportable does. Under
``torch.onnx.export``'s trace the answer is "yes", when the model runs eagerly "no": the compiled
model must take eager's branch on every input (``rewriter.mode_predicates``,
``rewriter.callees.asks_the_tracer``) or be refused at the line that asks
(``dycl.export.tracer_state``). Before the fix a submodule whose rewrite had no branch left once
the question was folded was kept as a call and traced as it is, with the tracer's answer: the
submodule clamp compiled on an example that never reaches it and answered 32 of 40 inputs wrong;
5 of these 7 cases failed."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from torch.jit import is_tracing
from torch.jit import is_tracing as traced_now

from tests.soundness.fresh_hunt import Case, at, check_case, seeded


class AsksInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        y = self.proj(x)
        if not torch.jit.is_tracing():
            y = y.clamp(min=-1.0)
        if y.sum() > 0:
            return y * 2
        return y - 1


class AsksExportInForward(AsksInForward):
    def forward(self, x):
        y = self.proj(x)
        if not torch.onnx.is_in_onnx_export():
            y = y.clamp(min=-1.0)
        if y.sum() > 0:
            return y * 2
        return y - 1


class ClampUnlessTraced(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        y = self.proj(x)
        if not torch.jit.is_scripting() and not torch.jit.is_tracing():
            y = y.clamp(min=-1.0)
        return y


class ClampUnlessTracedImported(ClampUnlessTraced):
    def forward(self, x):
        y = self.proj(x)
        if not is_tracing():
            y = y.clamp(min=-1.0)
        return y


class ScaleWhenTraced(ClampUnlessTraced):
    def forward(self, x):
        return self.proj(x) * (1.0 + float(torch.jit.is_tracing()))


class ClampUnlessTracedAlias(ClampUnlessTraced):
    def forward(self, x):
        y = self.proj(x)
        if not traced_now():
            y = y.clamp(min=-1.0)
        return y


def _with(inner: type[nn.Module]) -> type[nn.Module]:
    class Gated(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner()

        def forward(self, x):
            y = self.inner(x)
            if y.sum() > 0:
                return y * 2
            return y - 1

    return Gated


class AsksTracingState(AsksInForward):
    def forward(self, x):
        y = self.proj(x)
        if torch._C._get_tracing_state() is None:
            y = y.clamp(min=-1.0)
        if y.sum() > 0:
            return y * 2
        return y - 1


def _inputs(seed):
    def make():
        g = seeded(seed)
        return [torch.full((2, 4), 0.01)] + [torch.randn(2, 4, generator=g) * 3 for _ in range(49)]
    return make


CASES = {
    "is_tracing_in_forward": Case(AsksInForward, _inputs(241), 2),
    "is_in_onnx_export_in_forward": Case(AsksExportInForward, _inputs(242), 2),
    "is_tracing_in_submodule": Case(_with(ClampUnlessTraced), _inputs(243), 2),
    "imported_is_tracing_in_submodule": Case(_with(ClampUnlessTracedImported), _inputs(244), 2),
    "is_tracing_as_a_number_in_submodule": Case(_with(ScaleWhenTraced), _inputs(245), 2),
    "aliased_is_tracing_in_submodule": Case(_with(ClampUnlessTracedAlias), _inputs(246), 2,
                                            refused=at(r"torch\.jit\.is_tracing\(\)", "if not traced_now():")),
    "tracing_state_in_forward": Case(AsksTracingState, _inputs(247), 2,
                                     refused=at("needs 'torch'", "if torch._C._get_tracing_state() is None:")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_trace_question(name, tmp_path):
    case = CASES[name]
    assert check_case(case, tmp_path) == case.paths
