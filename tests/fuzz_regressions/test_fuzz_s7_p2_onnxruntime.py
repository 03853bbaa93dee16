# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s7_p2, backend onnxruntime.

Failure: error: input #1: RuntimeError: Error in execution: Non-zero status code returned while running Tanh node ... The output OrtValue provided for output 'x:out' has shape {1,5} but the computed output shape for this run is {2,5} (since cb408f4, fixed by 8e0ae2f)
"""

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


class Fuzz_s7_p2(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Tanh()])

    def forward(self, x):
        h = torch.tanh(x)
        if h.sum() < 0:
            x = torch.cat([x, x * 0.5], 0)[:3]
        x = self.layers[0](x)
        return x


SEED = 0
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [0.7407870888710022, 2.9130051136016846, 1.879619836807251, 1.5496976375579834,
     0.38373884558677673],
    [3.0819921493530273, -0.586857795715332, -4.357578754425049, 1.1368625164031982,
     -2.1690447330474854],
]


def test_fuzz_s7_p2_onnxruntime():
    check_regression(Fuzz_s7_p2, SEED, INPUTS, BACKEND, ATOL)
