# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s21_p10 (shrunk from 46 lines), backend onnxruntime.

Failure: unsupported: dycl cannot compile bool() of a tensor inside code that is exported as one graph, called from `x = lib_step0(x, 1)` (/tmp/fz21/shrink/Fuzz_s21_p10_shrink31.py:15): the exported graph would keep the example's value for every input at /work/main/.venv/lib/python3.11/site- ...
"""

import functools

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


# (the fuzzer generated these functions as a separate module imported as a library)
def lib_step0(x, k):
    if x.min() < -0.45:
        pass
    return x

class Fuzz_s21_p10(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = lib_step0(x, 1)
        return x


SEED = 647747718
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [-2.869037628173828, -1.4126975536346436, 3.8988399505615234, 7.565579414367676,
     -1.7969194650650024, -1.5784785747528076, -1.4269707202911377, -4.8276686668396],
]


def test_fuzz_s21_p10_onnxruntime():
    check_regression(Fuzz_s21_p10, SEED, INPUTS, BACKEND, ATOL)
