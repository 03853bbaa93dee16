# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s4246_p38 (shrunk from 47 lines), backend onnxruntime.

Failure: error: RewriteInvariantError: if with a static test left: not returned
"""

import functools

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


class Fuzz_s4246_p38(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList([nn.Linear(4, 4), nn.Tanh()])
        self.register_forward_pre_hook(lambda m, args: (args[0] * 0.5,))

    def forward(self, x):
        vals = [5, 6]
        i = int(x.max() > 0.5)
        x = self.heads[i](x) + i * 0.1
        x = x - vals[-1] * 0.1
        return x


SEED = 474577599
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [1.681321620941162, 0.06961984932422638, 3.3970327377319336, 2.0847179889678955],
]


def test_fuzz_s4246_p38_onnxruntime():
    check_regression(Fuzz_s4246_p38, SEED, INPUTS, BACKEND, ATOL)
