# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s21_p55 (shrunk from 50 lines), backend onnxruntime.

Failure: unsupported: dycl cannot compile `view` with a different structure on two paths that reach this line (a list of 3 on one, a list of 4 on another) at /tmp/fz21/shrink/Fuzz_s21_p55_shrink31.py:23 23 | x = x + view[1] * 0.05 ^ hint: give the value one structure on every path (the same list length, dict keys and ...
"""

import functools

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


class Fuzz_s21_p55(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(5, 5), nn.Linear(5, 5)])

    def forward(self, x):
        h = torch.tanh(x)
        vals = [5, 6]
        view = vals
        for layer4 in self.layers:
            if (x - h).sum() > 0.3:
                pass
            else:
                view[1:2] = [3, 2]
                x = x + view[1] * 0.05
        return x


SEED = 279243584
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [1.9644039869308472, -0.050805915147066116, -1.399453043937683, -0.30966097116470337,
     -2.4178860187530518],
]


def test_fuzz_s21_p55_onnxruntime():
    check_regression(Fuzz_s21_p55, SEED, INPUTS, BACKEND, ATOL)
