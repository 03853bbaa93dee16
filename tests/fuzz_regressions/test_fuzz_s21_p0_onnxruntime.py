# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s21_p0 (shrunk from 57 lines), backend onnxruntime.

Failure: unsupported: dycl cannot compile a value of type set in `seen`, passed between compiled parts of forward() at /tmp/fz21/shrink/Fuzz_s21_p0_shrink32.py:17 17 | x = x + len(seen) * 0.1 ^ hint: values that cross between compiled parts of forward() are tensors, Python numbers, devices, dtypes, None, strings, and ...
"""

import functools

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


class Fuzz_s21_p0(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        seen = {5}
        if float(x.mean()) > 0:
            seen.discard(5)
        x = x + len(seen) * 0.1
        return x


SEED = 1315554428
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [0.8781830668449402, 0.6795724034309387, -1.4419726133346558, 1.219200611114502,
     -0.7956454157829285, -0.36568474769592285, -1.5659083127975464, 0.8786554932594299],
]


def test_fuzz_s21_p0_onnxruntime():
    check_regression(Fuzz_s21_p0, SEED, INPUTS, BACKEND, ATOL)
