# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s21_p57 (shrunk from 34 lines), backend onnxruntime.

Failure: unsupported: dycl cannot compile a write to module state (self.history.append(k)) inside forward() at /tmp/fz21/shrink/Fuzz_s21_p57_shrink32.py:15 15 | self.history.append(k) ^ hint: dycl compiles parameters, buffers and attributes as constants: compute the new state in local variables and return it, or ...
"""

import functools

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


class Fuzz_s21_p57(nn.Module):
    def __init__(self):
        super().__init__()
        self.history = []

    def _helper0(self, x, k):
        self.history.append(k)
        return x

    def forward(self, x):
        x = self._helper0(x, 3)
        return x


SEED = 275829377
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [0.7127869725227356, 0.44832244515419006, 0.5276632905006409, 2.86177396774292,
     -0.9955787062644958, -2.1097025871276855],
]


def test_fuzz_s21_p57_onnxruntime():
    check_regression(Fuzz_s21_p57, SEED, INPUTS, BACKEND, ATOL)
