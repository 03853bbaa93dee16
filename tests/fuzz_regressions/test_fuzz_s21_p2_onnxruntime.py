# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s21_p2 (shrunk from 58 lines), backend onnxruntime.

Failure: unsupported: dycl cannot compile bool() of a tensor inside code that is exported as one graph, called from `x = lib_step0(x, 1)` (/tmp/fz21/shrink/Fuzz_s21_p2_shrink31.py:15): the exported graph would keep the example's value for every input at /work/main/.venv/lib/python3.11/site- ...
"""

import functools

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


# (the fuzzer generated these functions as a separate module imported as a library)
def lib_step0(x, k):
    if x.sum() > 0.3:
        pass
    return x

class Fuzz_s21_p2(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = lib_step0(x, 1)
        return x


SEED = 2059460996
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [-3.2032551765441895, -0.9602076411247253, 2.9775266647338867, 1.1926262378692627,
     -1.1663777828216553, 0.21908603608608246],
]


def test_fuzz_s21_p2_onnxruntime():
    check_regression(Fuzz_s21_p2, SEED, INPUTS, BACKEND, ATOL)
