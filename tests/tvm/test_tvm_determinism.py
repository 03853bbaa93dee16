"""The determinism check (``dycl.export.determinism``) guards the TVM backend too: a draw
outside torch inside compiled code is refused before TVM builds anything, and a
deterministic model of the same shape compiles and agrees on both of its paths."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn as nn

import dycl


class PythonRandomScale(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * random.uniform(0.9, 1.1)
        return x - 1


class FixedScale(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 1.05
        return x - 1


def test_a_draw_outside_torch_is_refused_with_tvm() -> None:
    with pytest.raises(dycl.UnsupportedError, match="differs from call to call.*test_tvm_determinism.py"):
        dycl.compile(PythonRandomScale().eval(), torch.ones(2, 3), backend="tvm")


def test_the_same_model_without_the_draw_compiles_with_tvm() -> None:
    compiled = dycl.compile(FixedScale().eval(), torch.ones(2, 3), backend="tvm")
    inputs = [torch.full((2, 3), v) for v in (1.0, -1.0, 0.5, -0.5)]
    paths = {bool(x.sum() > 0) for x in inputs}
    assert len(paths) == 2
    for x in inputs:
        torch.testing.assert_close(compiled(x), FixedScale()(x))
