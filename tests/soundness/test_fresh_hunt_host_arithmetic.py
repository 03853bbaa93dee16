"""Fresh hunt, family 16: host arithmetic on numbers read from data, where Python and the exported
graph could disagree: ``round()`` on exact halves (banker's rounding), ``int()`` of negatives, ``%`` and
``//`` and ``divmod`` with negative and float operands (Python's floor semantics, on the host and on
tensors), ``math.floor/ceil/log/exp/isfinite``, NaN compared on the host, an ``inf`` threshold,
``max``/``min`` mixing ints and floats, ``sum()`` of 0-d tensors and ``abs()``. All agree, or are
refused at the line where float32 in the graph could round differently from Python's float64."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn

from tests.soundness.fresh_hunt import Case, at, check_case, seeded


class RoundSteps(nn.Module):
    def forward(self, x):
        k = round(x.sum().item() * 2) / 2  # banker's on .5
        return x * k

class RoundHalf(nn.Module):
    def forward(self, x):
        k = round(x.sum().item())
        return x + k

class IntNeg(nn.Module):
    def forward(self, x):
        k = int(x.mean().item() * 3)
        return x * k

class ModNeg(nn.Module):
    def forward(self, x):
        s = x.sum().item()
        r = s % 1.5
        q = s // 1.5
        return x * r + q

class ModNegInt(nn.Module):
    def forward(self, x):
        n = int(x.sum().item() * 3)
        return x * (n % 4) + (n // 4)

class MathFns(nn.Module):
    def forward(self, x):
        s = x.abs().sum().item()
        if math.isfinite(math.log(s)) and math.floor(math.log(s)) > 1:
            return x * math.ceil(s)
        return x * math.exp(-s)

class NanCmp(nn.Module):
    def forward(self, x):
        m = x.max().item()
        if not (m < 2.0):   # NaN goes here
            return x.nan_to_num(0.0) * 0
        return x

class InfThresh(nn.Module):
    def __init__(self):
        super().__init__()
        self.clip = float("inf")
    def forward(self, x):
        m = x.abs().max().item()
        if m > self.clip:
            return x / m
        return x * 2

class MaxMixed(nn.Module):
    def forward(self, x):
        s = x.sum().item()
        k = max(0, min(s, 3))   # int/float mix
        return x * k

class SumTensors(nn.Module):
    def forward(self, x):
        parts = [x[i].sum() for i in range(x.shape[0])]
        tot = sum(parts)
        if tot > 0:
            return x * tot
        return x - tot

class AbsItem(nn.Module):
    def forward(self, x):
        a = abs(x.sum().item())
        if a > 2:
            return x / a
        return x

class DivmodItem(nn.Module):
    def forward(self, x):
        q, r = divmod(x.sum().item(), 2.0)
        return x * q + r

class PowNeg(nn.Module):
    def forward(self, x):
        s = x.mean().item()
        return x * (s ** 2) + (2 ** int(s))

class TruncDiv(nn.Module):
    def forward(self, x):
        s = x.sum()
        return x * torch.div(s, 2, rounding_mode="floor") + torch.fmod(s, 1.5) + torch.remainder(s, 1.5)

class TensorMod(nn.Module):
    def forward(self, x):
        s = x.sum()
        return x * (s % 1.5) + (s // 1.5)

class IntTensorMod(nn.Module):
    def forward(self, x):
        n = (x.sum() * 3).long()
        return x * (n % 4) + (n // 4) + (n % -3)

def _randn(seed):
    def make():
        g = seeded(seed)
        return [torch.randn(2, 4, generator=g) * 2 + (i % 2 - 0.5) * 2 for i in range(50)]
    return make


def _halves():  # sums that land exactly on k + 0.5, both signs
    inputs = []
    for i in range(50):
        x = torch.zeros(2, 4)
        x[0, 0] = (i - 25) / 2.0
        inputs.append(x)
    return inputs


def _with_nans():
    inputs = _randn(605)()
    for i in (3, 7, 20):
        inputs[i] = inputs[i].clone()
        inputs[i][i % 2, 1] = float("nan")
    return inputs


CASES = {
    "round_to_halves": Case(RoundSteps, _halves, 1),
    "round_bankers": Case(RoundHalf, _halves, 1),
    "int_of_negative": Case(IntNeg, _randn(601), 1),
    "float_mod_floordiv": Case(ModNeg, _randn(602), 1),
    "int_mod_floordiv": Case(ModNegInt, _randn(603), 1),
    "math_functions": Case(MathFns, _randn(604), 2, refused=at("math.ceil", "return x * math.ceil(s)")),
    "nan_compared_on_host": Case(NanCmp, _with_nans, 2),
    "inf_threshold": Case(InfThresh, _randn(606), 1),
    "max_min_int_float": Case(MaxMixed, _randn(607), 1),
    "sum_of_0d_tensors": Case(SumTensors, _randn(608), 2),
    "abs_of_item": Case(AbsItem, _randn(609), 2),
    "divmod_of_item": Case(DivmodItem, _randn(610), 1),
    "power_and_int": Case(PowNeg, _randn(611), 1, refused=at("int", "return x * (s ** 2) + (2 ** int(s))")),
    "tensor_rounding_modes": Case(TruncDiv, _randn(612), 1),
    "tensor_mod_floordiv": Case(TensorMod, _randn(613), 1, atol=1e-4),  # float32 rounding of the remainder
    "int_tensor_mod_negative_divisor": Case(IntTensorMod, _randn(614), 1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_host_arithmetic(name, tmp_path):
    case = CASES[name]
    assert check_case(case, tmp_path) == case.paths
