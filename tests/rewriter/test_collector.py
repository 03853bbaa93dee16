"""The collector is paused while the front end runs, and left as it was (``rewriter.collector``)."""

from __future__ import annotations

import gc

import pytest
import torch
from dycl.rewriter.collector import paused_collector
from torch import nn

import dycl


class _Halve(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return x / 2
        return x


@pytest.fixture
def collector_state():
    was_enabled = gc.isenabled()
    yield
    (gc.enable if was_enabled else gc.disable)()


def test_paused_inside_restored_after_nested_and_on_error(collector_state):
    gc.enable()
    with paused_collector():
        assert not gc.isenabled()
        with paused_collector():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner pause did not resume it early
    assert gc.isenabled()
    with pytest.raises(ValueError), paused_collector():
        raise ValueError("inside")
    assert gc.isenabled()
    gc.disable()
    with paused_collector():
        pass
    assert not gc.isenabled()  # a collector the caller turned off stays off


@pytest.mark.parametrize("enabled", [True, False])
def test_compile_leaves_the_collector_as_it_found_it(enabled, collector_state):
    (gc.enable if enabled else gc.disable)()
    model = _Halve().eval()
    compiled = dycl.compile(model, torch.ones(2))
    assert gc.isenabled() is enabled
    for x in (torch.ones(2), -torch.ones(2)):
        assert torch.equal(compiled(x), model(x))
