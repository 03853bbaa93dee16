# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s4242_p149 (shrunk from 68 lines), backend onnxruntime.

Failure: error: SelfCheckError: the compiled model differs from eager on the random input with the example's mean and 30 times its spread: output: values differ (max abs diff 0.877, expected magnitude up to 0.557). This is a dycl bug: please report it with the model; dycl.compile(..., check=False) returns the ...
"""

import functools

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


class Gate(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        y = self.fc(x)
        x = self._inner(x, 0)
        if x.mean().item() < 0:
            return x
        x = x + torch.tanh(y)
        return x

    def _inner(self, x, k):
        x = -x
        x = torch.tanh(self.fc(x))
        x = torch.tanh(x)
        return x


class Fuzz_s4242_p149(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8)])
        self.fc0 = nn.Linear(8, 8)
        self.fc1 = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 8)
        self.gates = nn.ModuleList([Gate(8) for _ in range(1)])

    def forward(self, x):
        x = self.fc0(x)
        x = self.gates[0](x)
        try:
            x = self.fc0(x)
        except RuntimeError:
            x = x * 0.5
        if x.sum() > 0.7:
            x = self.layers[1 % 1](x)
        return x


SEED = 1582084515
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [2.899932622909546, -0.6604687571525574, 1.4861716032028198, -0.43196815252304077,
     -2.386322498321533, -0.6417770385742188, 3.287975549697876, 5.235505104064941],
]


def test_fuzz_s4242_p149_onnxruntime():
    check_regression(Fuzz_s4242_p149, SEED, INPUTS, BACKEND, ATOL)
