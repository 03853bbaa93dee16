# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s21_p77 (shrunk from 43 lines), backend onnxruntime.

Failure: unsupported: dycl cannot compile a write to module state (self.running.copy_(torch.tanh(x[0]))) inside forward() at /tmp/fz21/shrink/Fuzz_s21_p77_shrink22.py:15 15 | self.running.copy_(torch.tanh(x[0])) ^ hint: dycl compiles parameters, buffers and attributes as constants: compute the new state in local ...
"""

import functools

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


class Fuzz_s21_p77(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("running", torch.zeros(5))

    def forward(self, x):
        self.running.copy_(torch.tanh(x[0]))
        return x


SEED = 720410083
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [-1.463752031326294, 4.513923168182373, 0.498965859413147, -1.8488636016845703,
     2.7928624153137207],
]


def test_fuzz_s21_p77_onnxruntime():
    check_regression(Fuzz_s21_p77, SEED, INPUTS, BACKEND, ATOL)
