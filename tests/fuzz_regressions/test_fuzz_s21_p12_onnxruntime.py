# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s21_p12 (shrunk from 56 lines), backend onnxruntime.

Failure: unsupported: dycl cannot compile a function decorated with @squash ('Fuzz_s21_p12._helper0') at /tmp/fz21/shrink/Fuzz_s21_p12_shrink34.py:20 20 | @squash ^ hint: dycl compiles the function's own source, which would silently drop the decorator's code: apply its effect inside the function, or remove the ...
"""

import functools

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


def squash(fn):
    @functools.wraps(fn)
    def wrapper(self, x, *args, **kwargs):
        return torch.tanh(fn(self, x, *args, **kwargs)) + 0.1
    return wrapper


class Fuzz_s21_p12(nn.Module):
    def __init__(self):
        super().__init__()

    @squash
    def _helper0(self, x, k):
        pass
        return x

    def forward(self, x):
        x = self._helper0(x, 2)
        return x


SEED = 812370598
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [-0.7287862300872803, -1.3197479248046875, 0.1323484629392624, -0.22223149240016937,
     -1.9288504123687744],
]


def test_fuzz_s21_p12_onnxruntime():
    check_regression(Fuzz_s21_p12, SEED, INPUTS, BACKEND, ATOL)
