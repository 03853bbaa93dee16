# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s4242_p208 (shrunk from 34 lines), backend onnxruntime.

Failure: error: SelfCheckError: the compiled model differs from eager on the example shifted by 10 times its spread: output: values differ (max abs diff 0.65, expected magnitude up to 0.531). This is a dycl bug: please report it with the model; dycl.compile(..., check=False) returns the model regardless
"""

import functools

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


# (the fuzzer generated these functions as a separate module imported as a library)
def lib_step0(x, k):
    x = -x
    return x

class Fuzz_s4242_p208(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(5, 5), nn.Linear(5, 5)])
        self.fc0 = nn.Linear(5, 5)
        self.fc1 = nn.Linear(5, 5)
        self.blocks = nn.ModuleList([nn.Linear(5, 5), nn.Tanh(), nn.Sequential(nn.Linear(5, 5), nn.ReLU())])

    def forward(self, x):
        x = torch.tanh(x)
        if x.size(0) > 1:
            x = x - x.mean(0, keepdim=True) * 0.5
        idx = int(x[0].argmax()) % len(self.blocks)
        x = self.blocks[idx](x) + idx * 0.1
        x = lib_step0(x, 0)
        x = self.blocks[min(int(x.mean(0).argmax()), 2)](x)
        return x


SEED = 207982670
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [[-0.9499470591545105, -0.5374576449394226, 1.1002618074417114, 0.3963228464126587,
     0.07894193381071091], [-1.5436910390853882, 1.4476354122161865, -0.8739938735961914,
     -1.3590658903121948, -0.6383640766143799], [-0.6915985345840454, 0.003944281954318285,
     -0.8217976689338684, 1.1117035150527954, -0.6808139085769653]],
]


def test_fuzz_s4242_p208_onnxruntime():
    check_regression(Fuzz_s4242_p208, SEED, INPUTS, BACKEND, ATOL)
