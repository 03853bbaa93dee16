# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s21_p39 (shrunk from 53 lines), backend onnxruntime.

Failure: unsupported: dycl cannot compile a write to module state (out= into self.count) inside forward() at /tmp/fz21/shrink/Fuzz_s21_p39_shrink31.py:15 15 | torch.add(self.count, 1, out=self.count) ^ hint: dycl compiles parameters, buffers and attributes as constants: compute the new state in local variables and ...
"""

import functools

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


class Fuzz_s21_p39(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(1))

    def forward(self, x):
        torch.add(self.count, 1, out=self.count)
        return x


SEED = 544270626
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [3.5657641887664795, -0.7045990824699402, -0.09149998426437378, -0.968722403049469,
     -0.06366525590419769, 3.374481201171875, 1.6464101076126099, -0.7723245620727539],
]


def test_fuzz_s21_p39_onnxruntime():
    check_regression(Fuzz_s21_p39, SEED, INPUTS, BACKEND, ATOL)
