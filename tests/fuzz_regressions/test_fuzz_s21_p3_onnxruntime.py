# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s21_p3 (shrunk from 58 lines), backend onnxruntime.

Failure: unsupported: dycl cannot compile a model in training mode (train() is set on '<model>') at /tmp/fz21/shrink/Fuzz_s21_p3_shrink23.py:13 13 | def forward(self, x): ^ hint: call model.eval() first, or pass mode='eval' to compile eval semantics (dropout off, batch-norm running statistics, self.training == False) ...
"""

import functools

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


class Fuzz_s21_p3(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        pass
        return x


SEED = 1727941702
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [-1.15230393409729, 0.43402835726737976, 2.4278171062469482, 1.701611042022705,
     -1.3329169750213623, -1.0259430408477783],
]


def test_fuzz_s21_p3_onnxruntime():
    check_regression(Fuzz_s21_p3, SEED, INPUTS, BACKEND, ATOL, train=True)
