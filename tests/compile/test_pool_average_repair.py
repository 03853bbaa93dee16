"""Max pooling of inputs holding NaN and ``-inf`` by the one-average repair (``onnx_pool_average``):
the claims it rests on -- the average of the bounded input is NaN exactly where a window holds a NaN
and -2 exactly where it holds ``-inf`` only, padding not counted -- checked on ONNX Runtime against
eager for 1-, 2- and 3-d pooling with padding, strides and ``ceil_mode``; and the graph holds one
``AveragePool`` and no flag pooling."""

from __future__ import annotations

import io

import onnx
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dycl
from dycl.backends.onnx_symbolics import local_symbolics
from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host
from dycl.harness.testing import assert_equivalent

NAN, INF = float("nan"), float("inf")
CONFIGS = [  # (dims, kernel, stride, padding, ceil_mode)
    (1, 3, 2, 1, True), (1, 2, 2, 0, False), (1, 4, 3, 2, True),
    (2, 3, 2, 1, False), (2, 3, 2, 1, True), (2, 2, 1, 0, False), (2, (3, 2), (2, 3), (1, 0), True),
    (3, 2, 2, 0, True), (3, 3, 2, 1, False),
]


class MaskedPool(nn.Module):  # scores masked with -inf past each length, then max-pooled
    def __init__(self, dims, kernel, stride, padding, ceil_mode):
        super().__init__()
        self.dims, self.kernel, self.stride, self.padding, self.ceil_mode = dims, kernel, stride, padding, ceil_mode

    def forward(self, x):
        pool = (F.max_pool1d, F.max_pool2d, F.max_pool3d)[self.dims - 1]
        pooled = pool(x, self.kernel, self.stride, self.padding, ceil_mode=self.ceil_mode)
        if torch.isnan(pooled).any():
            return pooled, 1
        return pooled


def _inputs(dims: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(70 + dims)
    shape = {1: (2, 3, 11), 2: (2, 2, 7, 9), 3: (1, 2, 5, 6, 7)}[dims]
    out = []
    for i in range(12):
        x = torch.randn(shape, generator=generator) * 4
        flat = x.view(-1)
        if i % 3 != 0:
            flat[torch.randperm(flat.numel(), generator=generator)[:3]] = NAN
        if i % 2 == 0:  # a masked tail: whole windows of -inf
            x[..., x.shape[-1] // 2:] = -INF
        if i % 4 == 1:
            flat[torch.randperm(flat.numel(), generator=generator)[:4]] = INF
        out.append(x)
    return out


@pytest.mark.parametrize("config", CONFIGS, ids=[str(c) for c in CONFIGS])
def test_pooling_with_nan_and_minus_inf_windows_agrees(config):
    model = MaskedPool(*config).eval()
    inputs = _inputs(config[0])
    compiled = dycl.compile(model, inputs[0], dynamic=False)
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-6) == 2


def test_through_the_host_and_one_average_pool(tmp_path):
    model = MaskedPool(2, 3, 2, 1, True).eval()
    inputs = _inputs(2)
    assert assert_agrees_in_process_and_as_host(model, inputs, tmp_path, 1e-6, min_paths=2, dynamic=False) == 2
    buffer = io.BytesIO()
    with local_symbolics():
        torch.onnx.export(nn.MaxPool2d(3, 2, 1, ceil_mode=True), (inputs[1],), buffer, dynamo=False, opset_version=17)
    kinds = [node.op_type for node in onnx.load_from_string(buffer.getvalue()).graph.node]
    assert kinds.count("MaxPool") == 1 and kinds.count("AveragePool") == 1 and "Cast" not in kinds


class DoublePools(nn.Module):  # float64 features (a scientific model), pooled raw and after a ReLU
    def forward(self, x):
        raw = F.max_pool2d(x, 3, 2, 1, ceil_mode=True)
        rectified = F.max_pool2d(torch.relu(x), 2)
        if torch.isnan(raw).any():
            return raw, rectified
        return raw


def test_float64_pooling_loads_and_agrees():
    """ONNX Runtime's CPU ``AveragePool`` has no float64 kernel: float64 keeps the flag repair."""
    model = DoublePools().eval()
    inputs = [x.double() for x in _inputs(2)]
    compiled = dycl.compile(model, inputs[0], dynamic=False)
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-12) == 2
