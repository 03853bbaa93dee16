"""Fresh hunt, family 7: values outside torch that change from call to call, inside code
compiled into a graph (numpy's and Python's ``random``, the clock), and the environment
(``os.environ``). Each traced draw was frozen into the graph: a silent wrong answer on
every call after the example. ``dycl.export.determinism`` now refuses them; the clock read
on the host (a time budget) compiles, the host reading it anew per call."""

from __future__ import annotations

import os
import random
import time

import numpy as np
import pytest
import torch
import torch.nn as nn

import dycl
from tests.soundness.fresh_hunt import Case, at, check_case, seeded


class NumpyNoise(nn.Module):  # noise augmentation written with numpy
    def forward(self, x):
        noise = torch.from_numpy(np.random.randn(*x.shape).astype("float32"))
        if x.sum() > 0:
            return x + 0.1 * noise
        return x


class PythonRandomScale(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * random.uniform(0.9, 1.1)
        return x


class ClockPhase(nn.Module):  # a time-based phase, as in a toy positional signal
    def forward(self, x):
        phase = torch.tensor(time.perf_counter() % 1.0)
        if x.mean() > 0:
            return torch.sin(x + phase)
        return x


class TimeBudget(nn.Module):  # anytime inference: stop refining when out of time (a host decision)
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        start = time.monotonic()
        for _ in range(3):
            if time.monotonic() - start > 60.0:
                break
            x = torch.tanh(self.fc(x)) * 3
            if x.abs().max() > 2.9:
                break
        return x


class DebugFlag(nn.Module):
    def forward(self, x):
        if os.environ.get("MODEL_DEBUG", "0") == "1":
            x = x * 10
        if x.sum() > 0:
            return x.relu()
        return x


def _signed_inputs(seed):
    def make():
        g = seeded(seed)
        return [torch.randn(2, 4, generator=g) + (1.5 if i % 2 else -1.5) for i in range(50)]
    return make


def _budget_inputs():
    g = seeded(75)
    return [torch.randn(1, 4, generator=g) * (0.05 if i % 3 == 0 else 3.0) for i in range(50)]


CASES = {
    "numpy_noise": Case(NumpyNoise, _signed_inputs(71), 2,
                        refused=at("differs from call to call", "noise = torch.from_numpy(np.random.randn")),
    "python_random_scale": Case(PythonRandomScale, _signed_inputs(72), 2,
                                refused=at("differs from call to call", "return x * random.uniform(0.9, 1.1)")),
    "clock_phase": Case(ClockPhase, _signed_inputs(73), 2,
                        refused=at("differs from call to call", "phase = torch.tensor(time.perf_counter()")),
    "time_budget": Case(TimeBudget, _budget_inputs, 4),
    "environment_flag": Case(DebugFlag, _signed_inputs(74), 2,
                             refused=at("reads the global 'os'", 'if os.environ.get("MODEL_DEBUG"')),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_value_outside_torch(name, tmp_path):
    case = CASES[name]
    assert check_case(case, tmp_path) == case.paths


class CoinFlipDepth(nn.Module):  # stochastic depth written with Python's random, not guarded by self.training
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        if random.random() < 0.5:
            x = self.fc(x)
        if x.sum() > 0:
            return x * 2
        return x


def test_python_random_on_the_host_draws_like_eager():
    """A draw that decides a branch is a host operation: the host draws from Python's own
    ``random``, one draw per call as eager does, so with one seed both take the same path."""
    model = CoinFlipDepth().eval()
    inputs = _signed_inputs(76)()
    compiled = dycl.compile(model, inputs[0], check=False)  # eager's own answer changes per call
    taken = set()
    for i, x in enumerate(inputs):
        random.seed(i)
        with torch.no_grad():
            expected = model(x.clone())
        random.seed(i)
        taken.add(random.random() < 0.5)
        random.seed(i)
        assert torch.allclose(compiled(x.clone()), expected, atol=1e-5), i
    assert taken == {True, False}
