# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s0_p3 (shrunk from 28 lines), backend onnxruntime.

Failure: inconsistent: input #1: tensors differ (max abs diff 0.211)
"""

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


class Fuzz_s0_p3(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x - x.mean().item() * 0.5
        return x


SEED = 1019527083
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [-1.6150813102722168, 3.2032668590545654, 0.27839672565460205, 0.6946966052055359,
     -0.4144139885902405],
    [-0.7619282603263855, 0.7126854658126831, 0.9555043578147888, -0.7390322089195251,
     -0.12903304398059845],
    [2.264216184616089, 0.5159004330635071, 0.7085838913917542, -0.66888028383255,
     -3.1509406566619873],
    [-0.34639832377433777, -0.7647573947906494, -0.500895082950592, 0.34042829275131226,
     -0.7838025093078613],
]


def test_fuzz_s0_p3_onnxruntime():
    check_regression(Fuzz_s0_p3, SEED, INPUTS, BACKEND, ATOL)
