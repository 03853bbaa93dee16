"""Issue 29 lever 1: the in-process model's three per-call guards (weights, globals,
folded config) run as one precomputed check (``dycl.in_process.call_guard``), and it
refuses exactly what they refuse."""

from __future__ import annotations

import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch
from dycl.in_process import tensor_layouts
from dycl.in_process.globals_guard import StaleGlobalsError
from dycl.in_process.staleness import StaleWeightsError

GAIN = 1.5


class EarlyExit(nn.Module):
    """A two-stage classifier that stops early when the first head is confident enough."""

    margin = 0.0  # a class attribute, shadowed per instance only if someone sets it

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU())
        self.head1 = nn.Linear(8, 3)
        self.body = nn.Linear(8, 8)
        self.head2 = nn.Linear(8, 3)
        self.confidence = 0.6
        self.scales = [1.0, 0.5]

    def forward(self, x):
        h = self.stem(x) * GAIN
        first = self.head1(h) * self.scales[0]
        if F.softmax(first, dim=-1).max() > self.confidence + self.margin:
            return first
        return self.head2(torch.relu(self.body(h))) * self.scales[1]


def _inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(7)
    return [torch.randn(1, 6, generator=generator) * scale for scale in (0.1, 0.3, 1, 3, 6) for _ in range(4)]


def _compiled():
    torch.manual_seed(2)
    model = EarlyExit().eval()
    return model, dycl.compile(model, torch.randn(1, 6))


def test_one_check_agrees_with_eager_in_process_and_as_host(tmp_path):
    model, compiled = _compiled()
    assert len(compiled._call_guard._dicts) > len(compiled._guard._tensors)  # the weights' slots and more
    assert assert_equivalent(model, compiled, _inputs(), min_paths=2, atol=1e-5) == 2
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, _inputs(), 1e-5)
    assert report["checked"] == len(_inputs()) and not report["problems"], report


def _write_weight(model):
    with torch.no_grad():
        model.head1.bias.add_(1.0)


def _replace_data(model):
    model.body.weight.data = torch.zeros_like(model.body.weight)


def _replace_slot(model):
    model.head2.weight = nn.Parameter(model.head2.weight.detach().clone())


def _delete_slot(model):
    del model.head2.bias  # the slot's key is gone (the fast check's getitem raises KeyError)


def _transpose_data(model):
    model.body.weight.data = model.body.weight.data.t()  # square: the same memory, read transposed


def _reshape_data(model):
    model.body.weight.data = model.body.weight.data.view(4, 16)


def _reinterpret_data(model):
    model.stem[1].running_var.data = model.stem[1].running_var.data.view(torch.int32)  # a buffer: no grad


def _shorten_data(model):
    model.head2.bias.data = model.head2.bias.data[:2]


def _swap_in_transposed_view(model):
    weight = model.body.weight  # the slot keeps the same object, now a transposed view of the same memory
    torch.utils.swap_tensors(weight, nn.Parameter(weight.detach().t()))


def _rebind_global(model):
    sys.modules[__name__].GAIN = 2.5


def _rebind_attribute(model):
    model.confidence = 0.9


def _change_list(model):
    model.scales[1] = 3.0


def _shadow_class_attribute(model):
    model.margin = 0.2


@pytest.mark.parametrize("change, error", [
    (_write_weight, StaleWeightsError), (_replace_data, StaleWeightsError), (_replace_slot, StaleWeightsError),
    (_delete_slot, StaleWeightsError), (_transpose_data, StaleWeightsError), (_reshape_data, StaleWeightsError),
    (_reinterpret_data, StaleWeightsError), (_shorten_data, StaleWeightsError),
    (_swap_in_transposed_view, StaleWeightsError),
    (_rebind_global, StaleGlobalsError), (_rebind_attribute, dycl.StaleConfigError),
    (_change_list, dycl.StaleConfigError), (_shadow_class_attribute, dycl.StaleConfigError),
])
def test_every_change_the_guards_refuse_is_refused(change, error, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "GAIN", GAIN)  # restored after _rebind_global
    model, compiled = _compiled()
    x = _inputs()[0]
    compiled(x)
    change(model)
    with pytest.raises(error, match="dycl.compile again"):
        compiled(x)
    with pytest.raises(error):  # and again: nothing was taken as the new normal
        compiled.run_numpy(x.numpy())


@pytest.mark.parametrize("native", [True, False])
def test_a_weight_rebound_to_another_view_of_its_memory_is_refused(native, monkeypatch):
    """``.data = w.data.t()`` keeps the data pointer and the version counter: only the layout shows it."""
    if not native:  # a torch without dynamo's C++ tensor check: the layouts compared in Python
        monkeypatch.setattr(tensor_layouts, "_native_check", lambda tensors: None)
    model, compiled = _compiled()
    assert (compiled._call_guard._stamp[-1].native is not None) == native
    x = _inputs()[0]
    compiled(x)
    pointer, version = model.body.weight.const_data_ptr(), model.body.weight._version
    _transpose_data(model)
    assert (model.body.weight.const_data_ptr(), model.body.weight._version) == (pointer, version)
    with pytest.raises(StaleWeightsError, match="body.weight"):
        compiled(x)
    _transpose_data(model)  # back as compiled: it agrees again
    assert assert_equivalent(model, compiled, _inputs(), min_paths=2, atol=1e-5) == 2


def test_inference_mode_and_frozen_weights_run_and_the_check_is_fast_again():
    """The native layout check also compares the modes and requires_grad: a change there is no
    refusal, and after one slow call the check passes fast again."""
    model, compiled = _compiled()
    layouts = compiled._call_guard._stamp[-1]
    with torch.inference_mode():
        assert assert_equivalent(model, compiled, _inputs(), min_paths=2, atol=1e-5) == 2
        assert compiled._call_guard._unchanged() and layouts.native is not None
    assert compiled._call_guard._stamp[-1] is layouts  # both modes fast, without the guards' slow path
    assert compiled._call_guard._unchanged()
    with torch.inference_mode():
        _transpose_data(model)  # refused in either mode
        with pytest.raises(StaleWeightsError, match="body.weight"):
            compiled(_inputs()[0])
    _transpose_data(model)
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    assert assert_equivalent(model, compiled, _inputs(), min_paths=2, atol=1e-5) == 2
    assert compiled._call_guard._unchanged()
    _transpose_data(model)  # and a real change after that is still refused
    with pytest.raises(StaleWeightsError, match="body.weight"):
        compiled(_inputs()[0])


def test_an_equal_value_rebound_keeps_working_and_the_check_fast_again(monkeypatch):
    model, compiled = _compiled()
    model.confidence = float("0.6")  # a new, equal float
    model.scales = [1.0, 0.5]  # a new, equal list
    monkeypatch.setattr(sys.modules[__name__], "GAIN", float("1.5"))
    assert not compiled._call_guard._unchanged()
    assert assert_equivalent(model, compiled, _inputs(), min_paths=2, atol=1e-5) == 2
    assert compiled._call_guard._unchanged()  # the slots were taken again after the guards passed them
    model.confidence = 0.9  # and a real change after that is still refused
    with pytest.raises(dycl.StaleConfigError, match="confidence"):
        compiled(_inputs()[0])
