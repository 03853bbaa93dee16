"""Code that asks whether it is being traced (``torch.jit.is_tracing()``): under the exporter's
trace it is, when the model runs eagerly it is not.

A submodule whose rewrite had no branch left once the question was folded was kept as a call
and traced as it is, with the tracer's answer: on main before the fix, ``Gated`` below compiled
(its example never reaches the clamp) and 32 of the 40 inputs came back wrong. Now such a callee
is inlined with the question folded (``rewriter.callees.asks_the_tracer``) and agrees on both
paths; a question the rewriter does not see (an alias) is refused at its line by the export's
watch (``dycl.export.tracer_state``), which leaves the caller's own profiler in place.
``torch.onnx.is_in_onnx_export()`` in forward is folded too."""

from __future__ import annotations

import cProfile
import sys

import pytest
import torch
from torch import nn
from torch.jit import is_tracing as traced_now

import dycl

pytestmark = pytest.mark.filterwarnings("ignore")


class SoftClip(nn.Module):
    """Clamps activations in eager runs only, as code written for export skips a slow op when traced."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        y = self.proj(x)
        if not torch.jit.is_tracing():
            y = y.clamp(min=-1.0)
        return y


class SoftClipByAlias(SoftClip):
    """The same question through an alias the rewriter does not know."""

    def forward(self, x):
        y = self.proj(x)
        if not traced_now():
            y = y.clamp(min=-1.0)
        return y


class Gated(nn.Module):
    def __init__(self, clip: type[SoftClip] = SoftClip) -> None:
        super().__init__()
        self.clip = clip()

    def forward(self, x):
        y = self.clip(x)
        if y.sum() > 0:
            return y * 2
        return y - 1


class AsksInForward(nn.Module):
    """The same question in the model's own forward, where dycl folds it."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        y = self.proj(x)
        if not torch.jit.is_tracing() and not torch.onnx.is_in_onnx_export():
            y = y.clamp(min=-1.0)
        if y.sum() > 0:
            return y * 2
        return y - 1


def _inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    return [torch.randn(2, 4, generator=generator) * 3 for _ in range(40)]


EXAMPLE = torch.full((2, 4), 0.01)


def test_a_submodule_asking_is_inlined_folded_and_agrees_on_both_paths():
    torch.manual_seed(0)
    model = Gated().eval()
    with torch.no_grad():
        assert not (model.clip.proj(EXAMPLE) < -1.0).any()  # the example never reaches the clamp
    compiled = dycl.compile(model, EXAMPLE, progress=False)
    inputs = _inputs()
    with torch.no_grad():
        paths = {bool(model.clip(x).sum() > 0) for x in inputs}
        clamped = sum(bool((model.clip.proj(x) < -1.0).any()) for x in inputs)
        for x in inputs:
            torch.testing.assert_close(compiled(x), model(x))
    assert paths == {True, False}
    assert clamped >= 5  # the clamp changes the answer on these inputs


def test_a_question_through_an_alias_is_refused_at_its_line():
    torch.manual_seed(0)
    model = Gated(SoftClipByAlias).eval()
    with pytest.raises(dycl.UnsupportedError, match=r"torch\.jit\.is_tracing\(\)") as raised:
        dycl.compile(model, EXAMPLE, progress=False)
    assert raised.value.location.path == __file__
    assert "traced_now()" in raised.value.location.source_line()


def test_the_question_in_forward_is_folded_and_agrees_on_both_paths():
    torch.manual_seed(0)
    model = AsksInForward().eval()
    inputs = _inputs()
    compiled = dycl.compile(model, inputs[0], progress=False)
    with torch.no_grad():
        paths = {bool(model.proj(x).clamp(min=-1.0).sum() > 0) for x in inputs}
        clamped = sum(bool((model.proj(x) < -1.0).any()) for x in inputs)
        for x in inputs:
            torch.testing.assert_close(compiled(x), model(x))
    assert paths == {True, False}
    assert clamped >= 5  # the clamp changes the answer on these inputs


def _compile_small() -> None:
    torch.manual_seed(0)
    dycl.compile(AsksInForward().eval(), torch.randn(2, 4), progress=False)


def test_a_python_profile_function_is_given_back():
    seen: list[str] = []

    def profile(frame, event, arg):
        seen.append(event)

    sys.setprofile(profile)
    try:
        _compile_small()
        assert sys.getprofile() is profile
    finally:
        sys.setprofile(None)
    assert seen


def test_cprofile_keeps_profiling_after_the_export():
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        _compile_small()
        assert sys.getprofile() is profiler
    finally:
        profiler.disable()
