"""``copy.deepcopy`` of a compiled model (``dycl.api.CompiledModel.__deepcopy__``): the copy runs the
same compiled code against a copy of the model, with guards of its own on the copy's weights; the
original and the copy each refuse their own model's changed weights, and nothing else's."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
import torch.nn as nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch


class EarlyExit(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(6, 6)
        self.head = nn.Linear(6, 2)
        self.deep = nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 2))
        self.threshold = 0.0

    def forward(self, x):
        h = torch.tanh(self.stem(x))
        if h.mean() > self.threshold:
            return self.head(h)
        return self.deep(h)


def _inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(5)
    return [torch.randn(3, 6, generator=generator) + shift for shift in (-2.0, -0.5, 0.5, 2.0) for _ in range(4)]


def test_a_deep_copy_runs_on_its_own_model(tmp_path):
    model = EarlyExit().eval()
    inputs = _inputs()
    compiled = dycl.compile(model, inputs[0])
    twin = copy.deepcopy(compiled)
    assert assert_equivalent(model, twin, inputs, min_paths=2, atol=1e-5) == 2
    report = run_host_without_torch(twin.save(tmp_path / "twin"), model, inputs, 1e-5)
    assert report["checked"] == len(inputs) and not report["problems"]
    # the copy watches a copy of the model: the original's changed weights stop the original only
    with torch.no_grad():
        model.head.weight.mul_(2)
    with pytest.raises(dycl.StaleWeightsError):
        compiled(inputs[0])
    assert assert_equivalent(_restored(model), twin, inputs, min_paths=2, atol=1e-5) == 2


def _restored(model: EarlyExit) -> EarlyExit:
    """The model as it was compiled (its head's weights halved back)."""
    restored = copy.deepcopy(model)
    with torch.no_grad():
        restored.head.weight.div_(2)
    return restored


def test_copied_with_its_model_the_copy_watches_the_copied_model():
    model = EarlyExit().eval()
    inputs = _inputs()
    bundle = {"model": model, "compiled": dycl.compile(model, inputs[0])}
    copied = copy.deepcopy(bundle)
    with torch.no_grad():
        copied["model"].head.weight.zero_()
    with pytest.raises(dycl.StaleWeightsError):
        copied["compiled"](inputs[0])
    assert assert_equivalent(model, bundle["compiled"], inputs, min_paths=2, atol=1e-5) == 2


def test_a_stale_compiled_model_is_not_copied():
    model = EarlyExit().eval()
    compiled = dycl.compile(model, _inputs()[0])
    model.threshold = 5.0
    with pytest.raises(dycl.StaleConfigError, match="threshold"):
        copy.deepcopy(compiled)


def test_pickling_says_what_to_do_instead_and_a_shallow_copy_is_the_same_model():
    model = EarlyExit().eval()
    inputs = _inputs()
    compiled = dycl.compile(model, inputs[0])
    with pytest.raises(TypeError, match="save"):
        pickle.dumps(compiled)
    assert assert_equivalent(model, copy.copy(compiled), inputs, min_paths=2, atol=1e-5) == 2
