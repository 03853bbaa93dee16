# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s21_p20 (shrunk from 56 lines), backend onnxruntime.

Failure: unsupported: dycl cannot compile a write to module state (an assignment to s["calls"]) inside forward() at /tmp/fz21/shrink/Fuzz_s21_p20_shrink34.py:16 16 | s["calls"] = s["calls"] + 3 ^ hint: dycl compiles parameters, buffers and attributes as constants: compute the new state in local variables and return ...
"""

import functools

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


class Fuzz_s21_p20(nn.Module):
    def __init__(self):
        super().__init__()
        self.stats = {"calls": 0}

    def forward(self, x):
        s = self.stats
        s["calls"] = s["calls"] + 3
        return x


SEED = 1108322935
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [-2.8111982345581055, -0.3566623032093048, 0.23196963965892792, 3.4811606407165527,
     0.4494223892688751, -3.743978261947632, 1.6979610919952393],
]


def test_fuzz_s21_p20_onnxruntime():
    check_regression(Fuzz_s21_p20, SEED, INPUTS, BACKEND, ATOL)
