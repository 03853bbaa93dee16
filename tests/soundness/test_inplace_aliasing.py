"""In-place updates through a second name: refused where they would change another name's
tensor (dycl tracks each name's value on its own), compiled where the tensor is fresh."""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn as nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch


class AliasThenAdd(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        y = h
        y += 1  # MARK
        if h.sum() > 0:
            return h * 2
        return h


class ViewThenMethod(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        flat = h.view(-1)
        flat.mul_(2)  # MARK
        if h.mean() > 0:
            return h + 1
        return h - 1


class FreshResidual(nn.Module):
    """A residual block as usually written: the in-place update is on a fresh activation."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.gate = nn.Linear(4, 1)

    def forward(self, x):
        out = self.fc(x)
        out += x
        out.relu_()
        if self.gate(out).sum() > 0:
            return out * 2
        return out


def _line(cls) -> int:
    lines, first = inspect.getsourcelines(cls.forward)
    return first + next(i for i, text in enumerate(lines) if "# MARK" in text)


@pytest.mark.parametrize("cls", [AliasThenAdd, ViewThenMethod])
def test_inplace_update_of_an_aliased_tensor_is_refused_at_its_line(cls):
    torch.manual_seed(0)
    with pytest.raises(dycl.UnsupportedError) as error:
        dycl.compile(cls().eval(), torch.randn(2, 4))
    assert "in-place update" in error.value.construct
    assert error.value.location.line == _line(cls) and error.value.location.path.endswith(__file__.split("/")[-1])


def test_inplace_update_of_a_fresh_activation_compiles(tmp_path):
    torch.manual_seed(0)
    model = FreshResidual().eval()
    compiled = dycl.compile(model, torch.randn(2, 4))
    inputs = [torch.randn(2, 4) * 2 for _ in range(24)]
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) == 2
    report = run_host_without_torch(compiled.save(tmp_path / "net"), model, inputs, 1e-5)
    assert report["checked"] == len(inputs) and not report["problems"], report
