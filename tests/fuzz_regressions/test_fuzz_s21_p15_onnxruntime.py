# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s21_p15 (shrunk from 62 lines), backend onnxruntime.

Failure: unsupported: dycl cannot compile bool() of a tensor inside code that is exported as one graph, called from `x = lib_step0(x, 1)` (/tmp/fz21/shrink/Fuzz_s21_p15_shrink35.py:15): the exported graph would keep the example's value for every input at /work/main/.venv/lib/python3.11/site- ...
"""

import functools

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


# (the fuzzer generated these functions as a separate module imported as a library)
def lib_step0(x, k):
    if x.min() < -0.8:
        pass
    return x

class Fuzz_s21_p15(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = lib_step0(x, 1)
        return x


SEED = 685307455
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [-0.1833571493625641, 0.24059870839118958, 1.9492231607437134, 0.9349669218063354],
]


def test_fuzz_s21_p15_onnxruntime():
    check_regression(Fuzz_s21_p15, SEED, INPUTS, BACKEND, ATOL)
