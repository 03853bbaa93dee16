# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s0_p783, backend torch.

Failure: error: input #0: ValueError: sub-DNN 3 was compiled for list lengths [(3,), (4,)], got (2,) (fixed by fd3b9f2)
"""

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


class Fuzz_s0_p783(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Sequential(nn.Linear(6, 6), nn.Tanh()), nn.Tanh()])

    def forward(self, x):
        outs = [x]
        for layer1 in self.layers:
            if x.mean().item() < 0.07:
                outs.append(x)
                x = x + outs[0] * 0.1
            x = layer1(x)
        outs.append(x)
        return x


SEED = 0
BACKEND = "torch"
ATOL = 1e-05
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [1.5409960746765137, -0.293428897857666, -2.1787893772125244, 0.5684312582015991,
     -1.0845223665237427, -1.3985954523086548],
    [0.40334683656692505, 0.8380263447761536, -0.7192575931549072, -0.40334352850914,
     -0.5966353416442871, 0.18203648924827576],
    [-0.8566746115684509, 1.1006041765213013, -1.0711873769760132, 0.1227012425661087,
     -0.5663174986839294, 0.3731146454811096],
    [-0.8919953107833862, -1.5091077089309692, 0.3703935444355011, 1.4565025568008423,
     0.9398099184036255, 0.7748488187789917],
]


def test_fuzz_s0_p783_torch():
    check_regression(Fuzz_s0_p783, SEED, INPUTS, BACKEND, ATOL)
