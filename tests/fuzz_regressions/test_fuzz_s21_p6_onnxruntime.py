# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s21_p6 (shrunk from 47 lines), backend onnxruntime.

Failure: unsupported: dycl cannot compile a write to module state (buf.mul_(0.5)) inside forward() at /tmp/fz21/shrink/Fuzz_s21_p6_shrink27.py:16 16 | buf.mul_(0.5) ^ hint: dycl compiles parameters, buffers and attributes as constants: compute the new state in local variables and return it, or update it outside the ...
"""

import functools

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


class Fuzz_s21_p6(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("running", torch.zeros(7))

    def forward(self, x):
        buf = self.running
        buf.mul_(0.5)
        return x


SEED = 1905439864
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [1.0089455842971802, 2.5238089561462402, 0.9243203401565552, -2.3705177307128906,
     0.3645990788936615, -0.11428435891866684, -2.1065871715545654],
]


def test_fuzz_s21_p6_onnxruntime():
    check_regression(Fuzz_s21_p6, SEED, INPUTS, BACKEND, ATOL)
