# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s0_p87 (shrunk from 56 lines), backend torch.

Failure: error: input #0: TypeError: _subdnn() missing 1 required positional argument: 'x'
"""

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


class Fuzz_s0_p87(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        outs = [x]
        x = (x + outs[-1]) * 0.5
        outs.append(x)
        return x


SEED = 1573947155
BACKEND = "torch"
ATOL = 1e-05
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [-0.6163454651832581, 0.6753075122833252, 1.09221351146698, 0.7014206051826477,
     -0.7419218420982361, -0.4055142104625702],
]


def test_fuzz_s0_p87_torch():
    check_regression(Fuzz_s0_p87, SEED, INPUTS, BACKEND, ATOL)
