"""A buffer made from constants (``torch.zeros(3, 4)``) that the host then writes into in place
(``hist[i, :2] = -1.0``, ``out[:, 0] = 1.0``) is computed afresh on every call, not a stored array
shared by the calls (``hcfg.optimize.hoist_constants``): it was read-only (a crash), and writable it
would carry one call's writes into the next. In process and through the torch-free host, on inputs
taking several paths, and an output written by the caller leaves the next call as it was."""

from __future__ import annotations

import torch
import torch.nn as nn

import dycl
from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host


class ActivationHistory(nn.Module):
    """Records each step's mean activation, or marks the step as skipped."""

    def __init__(self):
        super().__init__()
        self.step = nn.Linear(4, 4)

    def forward(self, x):
        history = torch.zeros(3, 4)
        h = x
        for i in range(3):
            h = torch.tanh(self.step(h))
            if h.mean() > 0.1:
                history[i] = h.mean(0)
            else:
                history[i, :2] = -1.0
        return history


class FlagColumn(nn.Module):
    def forward(self, x):
        out = torch.zeros(2, 3)
        if x.sum() > 0:
            out[:, 0] = 1.0
            out += 0.5
            return out
        return out


def _inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(2, 4, generator=generator) * 2 for _ in range(16)]


def test_host_writes_into_a_fresh_buffer(tmp_path):
    assert assert_agrees_in_process_and_as_host(ActivationHistory(), _inputs(), tmp_path, 1e-5) >= 3


def test_a_written_buffer_is_not_shared_between_calls(tmp_path):
    model = FlagColumn().eval()
    inputs = _inputs()
    assert assert_agrees_in_process_and_as_host(model, inputs, tmp_path, 1e-5) == 2
    compiled = dycl.compile(model, inputs[0])
    positive = next(x for x in inputs if x.sum() > 0)
    negative = next(x for x in inputs if x.sum() <= 0)
    first = compiled(positive)
    first.mul_(100)  # the caller's own output, theirs to write
    assert torch.equal(compiled(negative), torch.zeros(2, 3))
    assert torch.equal(compiled(positive), model(positive))
