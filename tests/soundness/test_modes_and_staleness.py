"""Training mode is never silently switched (item 3); weights changed after
compiling are detected and returned arrays never alias stored constants (item 4)."""

from __future__ import annotations

import copy
import timeit

import numpy as np
import pytest
import torch
import torch.nn as nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch
from dycl.in_process.staleness import StaleWeightsError
from dycl.model.model_state import TrainingModeError
from tests.soundness.test_module_state import _assert_same_state, _state


class Regularised(nn.Module):
    """A block written the usual way: dropout and batch norm, and a branch on self.training."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.bn = nn.BatchNorm1d(6)
        self.drop = nn.Dropout(0.5)
        self.head = nn.Linear(6, 3)
        self.limit = 0.0

    def forward(self, x):
        h = self.drop(torch.relu(self.bn(self.fc(x))))
        if self.training:
            h = h * 0.5
        if x.mean() > self.limit:
            return self.head(h)
        return self.head(-h)


def _trained() -> Regularised:
    torch.manual_seed(0)
    model = Regularised()
    with torch.no_grad():  # give batch norm statistics that are not the defaults
        model.bn.running_mean.uniform_(-1, 1)
        model.bn.running_var.uniform_(0.5, 2)
    return model


def _inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(4)
    return [torch.randn(2, 6, generator=generator) * s for s in (0.2, 1, 3) for _ in range(6)]


def test_train_mode_is_refused_with_a_hint():
    model = _trained()
    assert model.training
    before = _state(model)
    with pytest.raises(TrainingModeError) as info:
        dycl.compile(model, torch.randn(2, 6))
    assert isinstance(info.value, dycl.UnsupportedError) and isinstance(info.value, ValueError)
    assert "model.eval()" in str(info.value) and "mode='eval'" in str(info.value)
    _assert_same_state(before, _state(model))


def test_a_submodule_left_in_train_mode_is_refused():
    model = _trained().eval()
    model.drop.train()
    with pytest.raises(TrainingModeError, match="'drop'"):
        dycl.compile(model, torch.randn(2, 6))


@pytest.mark.parametrize("backend", ["onnxruntime", "torch"])
def test_mode_eval_compiles_eval_semantics_and_leaves_the_model_in_train_mode(backend):
    model = _trained()
    model.bn.eval()  # a frozen batch norm inside a training model: its own flag must survive
    before = _state(model)
    compiled = dycl.compile(model, torch.randn(2, 6), mode="eval", backend=backend)
    _assert_same_state(before, _state(model))
    reference = copy.deepcopy(model).eval()
    paths = assert_equivalent(reference, compiled, _inputs(), atol=1e-5)
    assert paths == 2
    _assert_same_state(before, _state(model))  # calling did not switch it either
    assert model.training and not model.bn.training and model.drop.training


def test_unknown_mode_is_a_value_error():
    with pytest.raises(ValueError, match="mode"):
        dycl.compile(_trained().eval(), torch.randn(2, 6), mode="train")


def _compiled():
    model = _trained().eval()
    return model, dycl.compile(model, torch.randn(2, 6))


@pytest.mark.parametrize("change", ["add_", "load_state_dict", "replace", "data", "buffer"])
def test_weights_changed_after_compile_raise(change):
    model, compiled = _compiled()
    x = torch.randn(2, 6)
    compiled(x)
    with torch.no_grad():
        if change == "add_":
            model.fc.weight.add_(1)
        elif change == "load_state_dict":
            state = {k: v + 1 for k, v in model.state_dict().items()}
            model.load_state_dict(state)
        elif change == "replace":
            model.head.bias = nn.Parameter(torch.zeros(3))
        elif change == "data":
            model.fc.weight.data = torch.zeros(6, 6)
        else:
            model.bn.running_mean.mul_(2)
    with pytest.raises(StaleWeightsError, match="dycl.compile again"):
        compiled(x)
    with pytest.raises(StaleWeightsError):
        compiled.run_numpy(x.numpy())


def test_unchanged_weights_keep_working_and_the_check_is_cheap():
    model, compiled = _compiled()
    x = torch.randn(2, 6)
    with torch.no_grad():
        model(x)  # eager inference does not count as a change
    compiled(x)
    guard = compiled._guard
    per_check = min(timeit.repeat(guard.check, number=200, repeat=5)) / 200
    assert per_check < 50e-6, per_check  # 10 tensors here; see the report for a zoo model


class ConstantOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.arange(4.0))
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        if x.sum() > 0:
            return self.table * 2, self.fc(x)
        return self.table + 1, x


def test_returned_constants_cannot_be_written(tmp_path):
    torch.manual_seed(0)
    model = ConstantOut().eval()
    compiled = dycl.compile(model, torch.ones(1, 4))
    assert compiled.stats["constants"] >= 1
    inputs = [torch.full((1, 4), v) for v in (1.0, -1.0, 2.0, -3.0)]
    for x in inputs:
        first = compiled.run_numpy(x.numpy().copy())  # the identity path returns its input itself
        for array in first:
            if not array.flags.writeable:
                with pytest.raises(ValueError, match="read-only"):
                    array += 100
            else:
                array += 100  # a fresh output: the caller owns it
        second = compiled.run_numpy(x.numpy())
        with torch.no_grad():
            expected = model(x)
        for e, a in zip(expected, second):
            np.testing.assert_allclose(a, e.numpy(), atol=1e-6)
        assert any(not a.flags.writeable for a in second), "the constant output is returned read-only"
    assert assert_equivalent(model, compiled, inputs, atol=1e-5) == 2
    report = run_host_without_torch(compiled.save(tmp_path / "net"), model, inputs, 1e-6)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}
