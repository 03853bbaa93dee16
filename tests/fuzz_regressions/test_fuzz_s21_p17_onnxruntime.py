# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s21_p17 (shrunk from 56 lines), backend onnxruntime.

Failure: unsupported: dycl cannot compile a function decorated with @halve ('Fuzz_s21_p17._helper0') at /tmp/fz21/shrink/Fuzz_s21_p17_shrink25.py:20 20 | @halve ^ hint: dycl compiles the function's own source, which would silently drop the decorator's code: apply its effect inside the function, or remove the ...
"""

import functools

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


def halve(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) * 0.5
    return wrapper


class Fuzz_s21_p17(nn.Module):
    def __init__(self):
        super().__init__()

    @halve
    def _helper0(self, x, k):
        pass
        return x

    def forward(self, x):
        x = self._helper0(x, 2)
        return x


SEED = 1225261506
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [0.8519668579101562, -0.24522027373313904, 1.1810595989227295, 0.535621702671051,
     -0.2891394793987274, -0.15986813604831696],
]


def test_fuzz_s21_p17_onnxruntime():
    check_regression(Fuzz_s21_p17, SEED, INPUTS, BACKEND, ATOL)
