# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s0_p87 (shrunk from 56 lines), backend torch.

Failure: error: input #0: TypeError: _subdnn() missing 1 required positional argument: 'x'
"""

import torch
from torch import nn

import dycl
from dycl.testing import outputs_match


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
    torch.manual_seed(SEED)
    model = Fuzz_s0_p87().eval()
    inputs = [torch.tensor([row]) for row in INPUTS]
    compiled = dycl.compile(model, inputs[0], backend=BACKEND)
    for i, x in enumerate(inputs):
        with torch.no_grad():
            expected = model(x)
        problem = outputs_match(expected, compiled(x), atol=ATOL)
        assert problem is None, f"input {i}: {problem}"
