# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s23_p496 (shrunk from 51 lines), backend onnxruntime.

Failure: error: input #5: RuntimeError: Error in execution: Got invalid dimensions for input: x for the following indices index: 0 Got: 3 Expected: 2 Please fix either the inputs/outputs or the model.
"""

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


class Fuzz_s23_p496(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc0 = nn.Linear(4, 4)

    def _helper0(self, x, k):
        if x.sum() > -0.3:
            pass
        else:
            x = self.fc0(x)
        return x

    def forward(self, x):
        for i1 in range(2):
            for i2 in range(2):
                x = self._helper0(x, 3)
                x = torch.cat([x, x * 0.5], 0)[:3]
        return x


SEED = 916072678
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [-0.5093740820884705, -1.4155851602554321, 1.9222159385681152, 1.1772241592407227],
    [0.822887659072876, -0.826033353805542, -2.343879461288452, 0.8238726854324341],
]


def test_fuzz_s23_p496_onnxruntime():
    check_regression(Fuzz_s23_p496, SEED, INPUTS, BACKEND, ATOL)
