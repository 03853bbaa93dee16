# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s21_p11 (shrunk from 58 lines), backend onnxruntime.

Failure: unsupported: dycl cannot compile an assignment to a model attribute (self.x = ...) inside forward() at /tmp/fz21/shrink/Fuzz_s21_p11_shrink33.py:15 15 | self.stats["calls"] += 1 ^ hint: keep per-call state in local variables and return it
"""

import functools

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


class Fuzz_s21_p11(nn.Module):
    def __init__(self):
        super().__init__()
        self.stats = {"calls": 0}

    def forward(self, x):
        self.stats["calls"] += 1
        return x


SEED = 1460776384
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [-0.5847909450531006, 1.9481879472732544, -2.000284433364868, 0.6471558809280396,
     -4.538430213928223, 2.884889841079712, -2.1444947719573975],
]


def test_fuzz_s21_p11_onnxruntime():
    check_regression(Fuzz_s21_p11, SEED, INPUTS, BACKEND, ATOL)
