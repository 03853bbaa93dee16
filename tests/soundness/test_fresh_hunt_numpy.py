"""Fresh hunt, family 8: numpy and Python math inside ``forward`` (``x.cpu().numpy().argmax()``
choosing a head, ``np.where``/``np.median`` on a tensor's array, ``math.*`` on ``.item()``,
``float(x.max())`` arithmetic, ``x.tolist()`` comprehensions). ``.numpy()`` read by the host
crashed the compiled model (the host's value is an array already: ``hcfg.portable``); an
array passed on to tensor code is refused at its line."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn as nn

from tests.soundness.fresh_hunt import Case, at, check_case, seeded


class Scale(nn.Module):
    def forward(self, x):
        return x * 3


class Shift(nn.Module):
    def forward(self, x):
        return x - 1


class Square(nn.Module):
    def forward(self, x):
        return x * x


class HeadByNumpyArgmax(nn.Module):  # the head picked on the CPU with numpy, as in many demo scripts
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList([Scale(), Shift(), Square()])

    def forward(self, x):  # x: (1, 3)
        k = x.detach().cpu().numpy().argmax()
        return self.heads[k](x)


class NumpyGate(nn.Module):
    def forward(self, x):
        if x.numpy().mean() > 0:
            return x * 2
        return x - 1


class LogScaled(nn.Module):
    def forward(self, x):
        s = x.abs().sum().item()
        scale = math.sqrt(s) + math.log1p(s)
        if scale > 3:
            return x / scale
        return x * scale


class MinMaxNormalise(nn.Module):
    def forward(self, x):
        hi = float(x.max())
        lo = float(x.min())
        if hi > 1:
            return (x - lo) / (hi - lo + 1e-6)
        return x


class MeanOfPositives(nn.Module):
    def forward(self, x):  # x: (5,)
        positives = [v for v in x.tolist() if v > 0]
        if not positives:
            return x
        return x * (sum(positives) / len(positives))


class NumpyLeakyRelu(nn.Module):
    def forward(self, x):
        arr = x.numpy()
        out = np.where(arr > 0, arr, 0.1 * arr)
        if out.sum() > 0:
            return torch.from_numpy(out) * 2
        return x


class MedianCentre(nn.Module):
    def forward(self, x):
        med = np.median(x.numpy())
        if med > 0:
            return x - torch.tensor(med)
        return x + 1


def _inputs(seed, shape, spread=True):
    def make():
        g = seeded(seed)
        return [torch.randn(*shape, generator=g) + ((i % 3 - 1) * 1.5 if spread else 0.0) for i in range(51)]
    return make


def _small_or_large_inputs():
    g = seeded(88)
    return [torch.randn(2, 4, generator=g) * (0.05 if i % 2 else 1.0) for i in range(50)]


CASES = {
    "numpy_argmax_head": Case(HeadByNumpyArgmax, _inputs(81, (1, 3), spread=False), 3),
    "numpy_gate": Case(NumpyGate, _inputs(82, (2, 4)), 2),
    "math_on_item": Case(LogScaled, _small_or_large_inputs, 2),
    "float_min_max": Case(MinMaxNormalise, _inputs(84, (2, 4), spread=False), 2),
    "tolist_comprehension": Case(MeanOfPositives, _inputs(85, (5,)), 2),
    "np_where_to_tensor": Case(NumpyLeakyRelu, _inputs(86, (2, 4)), 2,
                               refused=at("ndarray in `out`", "return torch.from_numpy(out) * 2")),
    "np_median_to_tensor": Case(MedianCentre, _inputs(87, (2, 4)), 2,
                                refused=at("float32 in `med`", "return x - torch.tensor(med)")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_numpy_in_forward(name, tmp_path):
    case = CASES[name]
    assert check_case(case, tmp_path) == case.paths
