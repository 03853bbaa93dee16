"""Mistakes in what dycl.compile is given get errors that say what to pass instead."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn

import dycl
from dycl.harness.testing import assert_equivalent


class TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x, y, scale=1.0):
        return self.fc(x + y) * scale


class NoForward(nn.Module):
    pass


def plain_function(x):
    return x * 2


def test_a_plain_function_is_not_a_module():
    with pytest.raises(TypeError, match=r"takes an nn.Module, got a function: wrap the code in a module"):
        dycl.compile(plain_function, torch.randn(1, 4))


def test_a_module_without_forward():
    with pytest.raises(TypeError, match=r"NoForward does not define forward\(\)"):
        dycl.compile(NoForward(), torch.randn(1, 4))


def test_a_scripted_module_asks_for_the_python_one():
    scripted = torch.jit.script(nn.Linear(4, 2))
    with pytest.raises(TypeError, match=r"TorchScript module: dycl reads Python source, so compile the original"):
        dycl.compile(scripted, torch.randn(1, 4))


def test_a_list_example_asks_for_a_tuple():
    with pytest.raises(TypeError, match=r"the example input is a list: pass a tuple, tuple\(example\)"):
        dycl.compile(TwoInputs(), [torch.randn(1, 4), torch.randn(1, 4)])


def test_a_numpy_example_asks_for_a_tensor():
    with pytest.raises(TypeError, match=r"the example input is a numpy array: pass torch.from_numpy\(array\)"):
        dycl.compile(nn.Linear(4, 2), np.ones((1, 4), np.float32))
    with pytest.raises(TypeError, match=r"example argument 1 is a numpy array"):
        dycl.compile(TwoInputs(), (torch.randn(1, 4), np.ones((1, 4), np.float32)))


def test_an_example_of_another_type():
    with pytest.raises(TypeError, match=r"the example input is float: pass a tensor, or a tuple of tensors"):
        dycl.compile(nn.Linear(4, 2), 3.0)


def test_too_few_inputs_says_to_pass_a_tuple():
    with pytest.raises(TypeError, match=r"TwoInputs.forward\(x, y, scale\) needs 2 inputs but the example gives 1 "
                                        r"\(missing 'y'\): pass a tuple \(x, y\) as the example"):
        dycl.compile(TwoInputs(), torch.randn(1, 4))


def test_too_many_inputs():
    with pytest.raises(TypeError, match=r"Linear.forward\(input\) takes 1 input but the example gives 2"):
        dycl.compile(nn.Linear(4, 2), (torch.randn(1, 4), torch.randn(1, 4)))


def test_a_correct_tuple_with_a_default_left_out_compiles():
    torch.manual_seed(0)
    model = TwoInputs().eval()
    compiled = dycl.compile(model, (torch.randn(1, 4), torch.randn(1, 4)))
    inputs = [(torch.randn(3, 4), torch.randn(3, 4)) for _ in range(4)]
    assert assert_equivalent(model, compiled, inputs, min_paths=1, atol=1e-5) == 1


def sequential_factory():
    """The way people build models without writing a class."""
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(8, 5))


def test_a_sequential_without_control_flow_is_one_sub_dnn_with_its_real_input():
    torch.manual_seed(0)
    model = sequential_factory().eval()
    compiled = dycl.compile(model, torch.randn(1, 3, 16, 16))
    assert compiled.stats["sub_dnns"] == 1 and compiled.stats["conditions"] == 0
    assert [(spec["name"], spec["shape"]) for spec in compiled.manifest["inputs"]] == [("input",
                                                                                       ["batch", 3, 16, 16])]
    (entry,) = compiled.manifest["sub_dnns"].values()
    assert [port["name"] for port in entry["inputs"]] == ["input"]
    inputs = [torch.randn(b, 3, 16, 16) for b in (1, 2, 5)]
    assert assert_equivalent(model, compiled, inputs, min_paths=1, atol=1e-5) == 1
