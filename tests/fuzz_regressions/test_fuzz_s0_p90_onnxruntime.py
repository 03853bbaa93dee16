# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s0_p90 (shrunk from 53 lines), backend onnxruntime.

Failure: inconsistent: input #3: tensors differ (max abs diff 0.1)
"""

import functools

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


class Fuzz_s0_p90(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        top, at = x.topk(2, dim=1)
        x = x + top[:, :1] * 0.1 + x.gather(1, at)[:, 1:] * 0.05
        h = x[:1] * 0.9
        if h.max() > 0.45:
            x = x * -0.9
        if x.mean() > 0:
            s = 2
        else:
            s = 0.5
        x = x * s + isinstance(s, int) * 0.1
        return x


SEED = 473339979
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [-3.2031655311584473, 5.67503547668457, -5.351858139038086, -2.3594346046447754,
     4.284603595733643, 0.9759619832038879, 2.250486373901367],
    [-1.3576099872589111, 0.1292477548122406, -4.047439098358154, 0.31541234254837036,
     -4.569713115692139, 1.986937165260315, 3.3037824630737305],
    [-4.828188419342041, -2.143460988998413, -9.075685501098633, -1.39169442653656,
     -0.6964232325553894, 4.555510520935059, 0.1383712887763977],
    [0.14029139280319214, -1.9417724609375, -3.012052059173584, -5.64940071105957,
     5.162613868713379, -1.8873541355133057, -3.955152988433838],
]


def test_fuzz_s0_p90_onnxruntime():
    check_regression(Fuzz_s0_p90, SEED, INPUTS, BACKEND, ATOL)
