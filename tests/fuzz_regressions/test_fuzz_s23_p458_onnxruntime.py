# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s23_p458 (shrunk from 44 lines), backend onnxruntime.

Failure: error: input #0: RuntimeError: Error in execution: Got invalid dimensions for input: x for the following indices index: 0 Got: 3 Expected: 2 Please fix either the inputs/outputs or the model.
"""

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


class Fuzz_s23_p458(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(5, 5)])

    def forward(self, x):
        step2 = 0
        while step2 < 2:
            x = self.layers[0](x)
            x = torch.cat([x, x * 0.5], 0)[:3]
            if x.mean().item() < 0:
                x = x.relu() - 0.1
            step2 += 1
        return x


SEED = 1037881324
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [2.1212759017944336, -3.794963836669922, -2.8658549785614014, -2.7660939693450928,
     -0.06436906009912491],
]


def test_fuzz_s23_p458_onnxruntime():
    check_regression(Fuzz_s23_p458, SEED, INPUTS, BACKEND, ATOL)
