# ruff: noqa  (generated code)
"""Found by `python -m dycl.fuzz`: program Fuzz_s2_p113 (shrunk from 50 lines), backend onnxruntime.

Failure: inconsistent: input #2: tensors differ (max abs diff 0.11)
"""

import functools

import torch
from torch import nn

from dycl.fuzz.regression import check_regression


class Fuzz_s2_p113(nn.Module):
    def __init__(self):
        super().__init__()
        self.history = []
        self.fc0 = nn.Linear(8, 8)

    def forward(self, x):
        if x.mean() > 0:
            s = 2
        else:
            s = 0.5
        x = x * s + isinstance(s, int) * 0.1
        x = self.fc0(x)
        self.history.append(float(x.mean()))
        x = x + len(self.history) * 0.01
        return x


SEED = 696640354
BACKEND = "onnxruntime"
ATOL = 0.0001
# inputs[0] is the example input the model is compiled for
INPUTS = [
    [-2.1317708492279053, -0.7055391669273376, -2.9189159870147705, 1.719568133354187,
     -2.6681203842163086, -2.739577531814575, -5.740429401397705, -2.555190086364746],
    [-1.6562588214874268, 5.184118747711182, 0.5869387984275818, 0.9204436540603638,
     -0.060600243508815765, 6.788446426391602, -2.896879196166992, 1.6063882112503052],
    [7.306304931640625, -0.21101239323616028, 0.9782701134681702, -0.9707272052764893,
     1.495978832244873, 3.2303667068481445, 0.17041729390621185, -5.429755210876465],
    [-0.8608419895172119, 1.7651541233062744, -0.16888663172721863, 3.1761598587036133,
     -4.600790023803711, 1.7147891521453857, -1.9410626888275146, 5.307063579559326],
]


def test_fuzz_s2_p113_onnxruntime():
    check_regression(Fuzz_s2_p113, SEED, INPUTS, BACKEND, ATOL)
