# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s21_p16 (shrunk from 59 lines), backend onnxruntime.

Failure: unsupported: dycl cannot compile a write to module state (self.count.add_(1)) inside forward() at /tmp/fz21/shrink/Fuzz_s21_p16_shrink28.py:15 15 | self.count.add_(1) ^ hint: dycl compiles parameters, buffers and attributes as constants: compute the new state in local variables and return it, or update it ...
"""

import functools

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


class Fuzz_s21_p16(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(1))

    def forward(self, x):
        self.count.add_(1)
        return x


SEED = 1239072728
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [-1.7201201915740967, 0.081266388297081, 1.4535608291625977, 1.287793517112732],
]


def test_fuzz_s21_p16_onnxruntime():
    check_regression(Fuzz_s21_p16, SEED, INPUTS, BACKEND, ATOL)
