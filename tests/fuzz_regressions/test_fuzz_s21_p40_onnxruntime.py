# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s21_p40 (shrunk from 55 lines), backend onnxruntime.

Failure: unsupported: dycl cannot compile a write to module state (self.history.append(0)) inside forward() at /tmp/fz21/shrink/Fuzz_s21_p40_shrink24.py:15 15 | self.history.append(0) ^ hint: dycl compiles parameters, buffers and attributes as constants: compute the new state in local variables and return it, or ...
"""

import functools

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


class Fuzz_s21_p40(nn.Module):
    def __init__(self):
        super().__init__()
        self.history = []

    def forward(self, x):
        self.history.append(0)
        return x


SEED = 462060004
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [-1.1732045412063599, 2.0595109462738037, -1.6733319759368896, -1.4067132472991943,
     -1.8054468631744385, -1.8856546878814697],
]


def test_fuzz_s21_p40_onnxruntime():
    check_regression(Fuzz_s21_p40, SEED, INPUTS, BACKEND, ATOL)
