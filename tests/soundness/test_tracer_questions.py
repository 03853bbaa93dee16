"""The export's watch for questions about the tracer (``dycl.export.tracer_state``) runs a profile
function on the exporting thread: a profile function or a ``cProfile`` profiler the caller runs
is in place again after ``dycl.compile`` (the compiles themselves: family 24,
``test_fresh_hunt_trace_questions.py``)."""

from __future__ import annotations

import cProfile
import sys

import pytest
import torch

import dycl
from tests.soundness.test_fresh_hunt_trace_questions import AsksInForward

pytestmark = pytest.mark.filterwarnings("ignore")


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
