"""``dycl.in_process.tensor_layouts.LayoutCheck`` with a module shared by two parents, whose weights
the guard lists twice: the native check still runs (it refuses a tensor given twice; the Python
comparison it replaces cost skipnet_rnn 176 µs a call), and a shared weight rebound to another
view of its memory is still seen."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from dycl.in_process.tensor_layouts import LayoutCheck

pytest.importorskip("torch._C._dynamo.guards", reason="torch without dynamo's tensor check")


def test_a_tensor_listed_twice_keeps_the_native_check_and_sees_a_new_layout():
    shared = nn.Linear(4, 4)
    other = nn.Linear(4, 2)
    check = LayoutCheck([shared.weight, shared.bias, other.weight, shared.weight, shared.bias])
    assert check.native is not None
    assert check.same()
    with torch.no_grad():
        shared.weight.data = shared.weight.data.t()  # the same memory, read transposed
    assert not check.same()
