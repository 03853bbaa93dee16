"""Edge cases: straight-line models, NaN and Inf inputs."""

from __future__ import annotations

import torch
import torch.nn as nn

import dycl
from dycl.harness.testing import outputs_match


class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))

    def forward(self, x):
        for _ in range(2):
            x = x * 0.5
        return self.body(x)


def test_model_without_data_dependent_control_flow_is_one_sub_dnn():
    torch.manual_seed(0)
    model = Plain().eval()
    compiled = dycl.compile(model, torch.randn(1, 4))
    assert compiled.stats["sub_dnns"] == 1 and compiled.stats["conditions"] == 0
    for _ in range(10):
        x = torch.randn(1, 4)
        assert outputs_match(model(x), compiled(x), atol=1e-5) is None


class Guarded(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        if y.sum() > 0:
            return y * 2
        return torch.nan_to_num(y, nan=-1.0)


def test_nan_and_inf_inputs_give_what_eager_gives():
    torch.manual_seed(0)
    model = Guarded().eval()
    compiled = dycl.compile(model, torch.ones(1, 4))
    specials = [torch.full((1, 4), float("nan")), torch.full((1, 4), float("inf")),
                torch.full((1, 4), -float("inf")), torch.tensor([[1.0, float("nan"), 2.0, 3.0]])]
    for x in specials:
        with torch.no_grad():
            expected = model(x)
        assert outputs_match(expected, compiled(x), atol=1e-5) is None, x
