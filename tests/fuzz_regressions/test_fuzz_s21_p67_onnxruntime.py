# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s21_p67 (shrunk from 40 lines), backend onnxruntime.

Failure: unsupported: dycl cannot compile a branch that fails on the example input (NameError: name 'h' is not defined) at /tmp/fz21/shrink/Fuzz_s21_p67_shrink44.py:17 17 | if float(h.mean()) > 0.17: ^ hint: dycl runs every branch once on the example input to learn shapes; give an example for which each branch can run
"""

import functools

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


class Fuzz_s21_p67(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        outs = [x]
        if outs[-1].min() < -1.5:
            h = x[:1] * 0.9
        if float(h.mean()) > 0.17:
            return torch.tanh(x)
        return x


SEED = 1166395717
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [4.452938556671143, 3.209343194961548, -1.0767992734909058, 6.702356815338135,
     5.073767185211182, -5.178080081939697, -4.206578731536865, 0.4362456798553467],
]


def test_fuzz_s21_p67_onnxruntime():
    check_regression(Fuzz_s21_p67, SEED, INPUTS, BACKEND, ATOL)
