"""Sizes as Python numbers (issue 15, item 5): ``round``, ``min``/``max``,
``torch.sym_min``/``sym_max``, ``math.floor``/``ceil`` and integer arithmetic on sizes,
used as slice bounds, view sizes and returned numbers, are computed per call with the
real size: compiled with a symbolic batch and called with many batch sizes, the
compiled model (in-process and torch-free host) gives eager's results, whose shapes
differ from size to size (``round(n, ndigits)`` of an integer size too). A float computed from sizes, a
float read off the data rounded to digits in a sub-DNN, and a loop over a symbolic size are refused at
their line."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import dycl
from dycl.harness.testing import outputs_match
from dycl.harness.testing_host import run_host_without_torch

SIZES = (1, 2, 3, 4, 5, 6, 7, 9, 10, 13)


class HalfRounded(nn.Module):
    """ExportDB's dynamic_shape_round, with a symbolic batch."""

    def forward(self, x):
        return x[: round(x.shape[0] / 2)] * 2


class Clipped(nn.Module):
    def forward(self, x):
        keep = min(x.shape[0], 4)
        head = x[:keep]
        return head / keep + torch.sym_max(x.size(0) - 3, 1)


class Pooled(nn.Module):
    """Ceil-mode pooling written by hand: a view whose size is computed from the batch."""

    def forward(self, x):
        groups = math.ceil(x.shape[0] / 3)
        padded = torch.cat([x, x.new_zeros(groups * 3 - x.shape[0], x.shape[1])])
        pooled = padded.view(groups, 3, x.shape[1]).amax(1)
        return pooled[: max(math.floor(x.shape[0] / 4), 1)]


class Counted(nn.Module):
    """A Python number from sizes returned next to a tensor."""

    def forward(self, x):
        n = torch.sym_min(x.size(0), 5) * 2 + x.shape[1] // 2
        return x[:n // 3].relu(), n


class RoundedToDigits(nn.Module):
    """round(n, ndigits) of an integer size: the integer itself."""

    def forward(self, x):
        return x[: round(x.shape[0] // 2 + 1, 1)] * 2


@pytest.mark.parametrize("model_class", [HalfRounded, Clipped, Pooled, Counted, RoundedToDigits],
                         ids=lambda c: c.__name__)
def test_sizes_as_numbers_follow_the_symbolic_batch(model_class, tmp_path):
    model = model_class().eval()
    generator = torch.Generator().manual_seed(7)
    inputs = [torch.randn(b, 4, generator=generator) for b in SIZES]
    compiled = dycl.compile(model, inputs[5])
    results = set()
    with torch.no_grad():
        for x in inputs:
            expected = model(x)
            problem = outputs_match(expected, compiled(x), atol=1e-5)
            assert problem is None, f"batch {x.shape[0]}: {problem}"
            first = expected[0] if isinstance(expected, tuple) else expected
            results.add(tuple(first.shape))
    assert len(results) >= 3, results  # the sizes really varied what the model computed
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, 1e-5)
    assert report["checked"] == len(inputs) and not report["problems"], report


class FloatSize(nn.Module):
    def forward(self, x):
        return x[: math.ceil(x.shape[0] * 0.7)]  # MARK


class LoopOverBatch(nn.Module):
    def forward(self, x):
        total = x[0]
        for i in range(1, x.shape[0]):  # MARK
            total = total + x[i]
        return total


class RoundedScale(nn.Module):
    """round(s, 1) of a host float read off the data, inside a sub-DNN (was a TypeError from the trace)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        scale = float(x.abs().mean()) * 3
        return self.proj(x) * round(scale, 1)  # MARK


@pytest.mark.parametrize("model_class", [FloatSize, LoopOverBatch, RoundedScale], ids=lambda c: c.__name__)
def test_what_cannot_stay_exact_is_refused_at_its_line(model_class):
    with pytest.raises(dycl.UnsupportedError) as info:
        dycl.compile(model_class().eval(), torch.randn(6, 4))
    assert info.value.location is not None and "MARK" in info.value.location.source_line()


def test_integer_forms_match_python_on_a_grid():
    """What the exported graph computes from integer tensors equals Python's result."""
    from dycl.export.size_numbers import SizeNumbers

    ops = SizeNumbers(None)
    checked = 0
    for a in range(-25, 26):
        for b in (1, 2, 3, 4, 5, 7, -2, -3):
            ta, tb = torch.tensor(a), torch.tensor(b)
            for got_a in (ta, a):
                for got_b in (tb, b):
                    if not isinstance(got_a, torch.Tensor) and not isinstance(got_b, torch.Tensor):
                        continue
                    assert int(ops.round_div(got_a, got_b)) == round(a / b), (a, b)
                    assert int(ops.floor_div(got_a, got_b)) == math.floor(a / b), (a, b)
                    assert int(ops.ceil_div(got_a, got_b)) == math.ceil(a / b), (a, b)
                    assert int(ops.trunc_div(got_a, got_b)) == int(a / b), (a, b)
                    checked += 1
            assert int(ops.min(ta, b, 3)) == min(a, b, 3) and int(ops.max(ta, b)) == max(a, b)
            assert ops.round_div(a, b) == round(a / b)  # Python numbers: the builtin itself
    assert checked == 51 * 8 * 3
    with pytest.raises(dycl.UnsupportedError):
        ops.round(torch.tensor(2.5))
    assert ops.round_digits(2.25, 1) == round(2.25, 1) and int(ops.round_digits(torch.tensor(7), 2)) == 7
    for value, digits in ((torch.tensor(2.5), 1), (torch.tensor(1250), -2)):
        with pytest.raises(dycl.UnsupportedError):
            ops.round_digits(value, digits)
