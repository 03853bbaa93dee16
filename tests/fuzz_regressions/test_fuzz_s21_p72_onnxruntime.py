# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s21_p72 (shrunk from 40 lines), backend onnxruntime.

Failure: unsupported: dycl cannot compile a write to module state (self.count.add_(int(x.sum() > 0))) inside forward() at /tmp/fz21/shrink/Fuzz_s21_p72_shrink29.py:15 15 | self.count.add_(int(x.sum() > 0)) ^ hint: dycl compiles parameters, buffers and attributes as constants: compute the new state in local variables ...
"""

import functools

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


class Fuzz_s21_p72(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(1))

    def _helper0(self, x, k):
        self.count.add_(int(x.sum() > 0))
        return x

    def forward(self, x):
        x = self._helper0(x, 3)
        return x


SEED = 722422889
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [0.10313732922077179, -0.7556810975074768, -0.17104139924049377, -0.8785613775253296,
     -6.312786102294922, 2.132359504699707, -0.7756834030151367, -1.7492190599441528],
]


def test_fuzz_s21_p72_onnxruntime():
    check_regression(Fuzz_s21_p72, SEED, INPUTS, BACKEND, ATOL)
