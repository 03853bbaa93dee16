"""``torch.unique(..., return_counts=True)`` of a floating tensor (``dycl.backends.onnx_unique``):
computed in the exported graph as eager computes it, NaN entries too (each its own value, counted
once). A histogram of quantised activations that branches on what it finds, against eager in
process and as a torch-free host, on inputs with and without NaN; ``return_inverse`` of a floating
tensor refused at its line (eager's inverse of NaN entries follows its sort, no rule)."""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn as nn

import dycl
from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host


class LevelHistogram(nn.Module):
    """Quantises activations to half-steps and looks at how they spread over the levels."""

    def forward(self, x):
        levels, counts = torch.unique(torch.round(x * 2) / 2, return_counts=True)
        if len(levels) > 5:
            x = x.clamp(-1.0, 1.0)
        if counts.max() > 2:
            return x * 0.5, levels, counts
        return x, levels, counts


def _inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    inputs = []
    for i in range(24):
        x = torch.randn(1 + i % 3, 4, generator=generator) * (0.3, 1.0, 2.5)[i % 3]
        if i % 4 == 3:
            x[0, i % 4] = float("nan")  # a NaN is a level of its own
        if i % 8 == 7:
            x[-1, 0] = float("nan")
        inputs.append(x)
    return inputs


def test_unique_with_counts_of_a_float_tensor_agrees_with_eager_nan_included(tmp_path):
    model = LevelHistogram().eval()
    inputs = _inputs()
    assert sum(bool(x.isnan().any()) for x in inputs) >= 6
    paths = assert_agrees_in_process_and_as_host(model, inputs, tmp_path, atol=1e-6, min_paths=3)
    assert paths >= 3, paths


class Regroup(nn.Module):
    def forward(self, x):
        values, inverse = torch.unique(x, return_inverse=True)
        return values[inverse] * 2


def test_unique_with_the_inverse_of_a_float_tensor_is_refused_at_its_line():
    with pytest.raises(dycl.UnsupportedError) as caught:
        dycl.compile(Regroup().eval(), torch.randn(2, 3))
    message = str(caught.value)
    lines, first = inspect.getsourcelines(Regroup.forward)
    line = first + next(i for i, text in enumerate(lines) if "torch.unique" in text)
    assert "unique" in message and "return_inverse of a floating tensor" in message
    assert f"{__file__}:{line}" in message
