"""Fresh hunt, family 3: Python numbers read from tensors and used in arithmetic, as loop
bounds or indices, in ``sorted``/``max``/``sum`` over ``tolist()``, in f-strings."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn

from tests.soundness.fresh_hunt import Case, at, check_case, seeded


class MaxAbsScale(nn.Module):
    def forward(self, x):
        s = x.abs().max().item()
        if s > 1.0:
            x = x / s
        return x * 3


def _scale_inputs():
    g = seeded(21)
    return [torch.randn(2, 5, generator=g) * (0.1 if i % 3 == 0 else 2.0) for i in range(51)]


class IntSumLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        n = int(x.sum().clamp(0, 4))
        h = x
        for _ in range(n):
            h = torch.tanh(self.fc(h))
        return h


def _int_sum_inputs():
    g = seeded(22)
    return [torch.randn(1, 4, generator=g) + (i % 5) * 0.5 for i in range(50)]


class TolistStats(nn.Module):
    def forward(self, x):  # x: (B, D); scale by the largest row sum, computed in Python
        sums = x.sum(1).tolist()
        best = max(sums)
        total = sum(abs(s) for s in sums) + 1e-6
        ranked = sorted(range(len(sums)), key=lambda i: sums[i])
        return x[ranked[-1]] * best / total


def _tolist_inputs():
    g = seeded(23)
    return [torch.randn(3, 4, generator=g) for _ in range(50)]


class FormattedTag(nn.Module):
    def forward(self, x):
        tag = f"{float(x.mean()):.1f}"
        if tag.startswith("-"):
            return -x
        if tag == "0.0":
            return x * 0
        return x


def _tag_inputs():
    g = seeded(24)
    return [torch.randn(2, 3, generator=g) * (0.01 if i % 4 == 0 else 1.0) for i in range(52)]


class ArgmaxRowLookup(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.randn(5, 3))

    def forward(self, x):  # x: (5,)
        i = int(x.argmax())
        row = self.table[i]
        if i >= 3:
            row = row * 10
        return row + x[i]


def _lookup_inputs():
    g = seeded(25)
    return [torch.randn(5, generator=g) for _ in range(50)]


class PythonStandardize(nn.Module):
    def forward(self, x):
        m = x.mean().item()
        sd = x.std().item()
        if sd < 1e-3:
            return x - m
        return (x - m) / sd


def _standardize_inputs():
    g = seeded(26)
    return [torch.randn(4, 3, generator=g) if i % 5 else torch.full((4, 3), float(i)) for i in range(50)]


class LogSteps(nn.Module):
    def forward(self, x):
        t = x.norm().item()
        steps = math.ceil(math.log2(t + 1))
        for _ in range(min(steps, 4)):
            x = x * 0.5
        return x


def _log_inputs():
    g = seeded(27)
    return [torch.randn(3, generator=g) * (0.2 + i % 7) for i in range(50)]


CASES = {
    "max_abs_scale": Case(MaxAbsScale, _scale_inputs, 2),
    "int_sum_loop": Case(IntSumLoop, _int_sum_inputs, 5),  # a clamped count: rewriter.trip_bounds
    "tolist_stats": Case(TolistStats, _tolist_inputs, 1, refused=at("a lambda", "key=lambda i: sums[i]")),
    "formatted_tag": Case(FormattedTag, _tag_inputs, 3),
    "argmax_row_lookup": Case(ArgmaxRowLookup, _lookup_inputs, 2),
    "python_standardize": Case(PythonStandardize, _standardize_inputs, 2),
    "log_steps": Case(LogSteps, _log_inputs, 4),  # capped by min(): 4 of its 5 counts among the inputs
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_host_numbers(name, tmp_path):
    case = CASES[name]
    assert check_case(case, tmp_path) == case.paths
