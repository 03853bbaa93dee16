"""``for _ in range(n)`` where ``n`` comes from data but has a static cap (``rewriter.trip_bounds``):
a pondering network that picks its step count with an argmax over a head's outputs, a refiner whose
count from ``.item()`` is capped by ``min``, a remainder (the fuzzer's form), a clamp and a
``range(1, n + 1)`` with a ``break``, a count of positive features and an argmax over features
(both bounded by a dim ``dynamic=`` leaves static). Each compiled model against eager, in process and as a
torch-free host, on inputs that run several different trip counts (counted, asserted); and the
refusals where no cap is provable."""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dycl
from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host


class PonderNet(nn.Module):
    """Chooses how many refinement steps to run from a halting head's argmax (0..3)."""

    def __init__(self, dim: int = 8, max_steps: int = 4) -> None:
        super().__init__()
        self.halt = nn.Linear(dim, max_steps)
        self.cell = nn.Linear(dim, dim)

    def forward(self, x):
        steps = self.halt(x).argmax(dim=-1)[0]
        h = x
        for _ in range(int(steps)):
            h = torch.tanh(self.cell(h)) + h
        return h, steps


class CappedRefiner(nn.Module):
    """A Python count from ``.item()``, capped with ``min`` by a number the model holds."""

    def __init__(self, dim: int = 6, max_iters: int = 5) -> None:
        super().__init__()
        self.max_iters = max_iters
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        n_iter = min(int(x.abs().sum().item()), self.max_iters)
        out = x
        for i in range(n_iter):
            out = F.relu(self.proj(out)) + 0.1 * i
        return out


class RemainderSteps(nn.Module):
    """The fuzzer's host loop bound: ``int(...) % 3``."""

    def forward(self, x):
        t = int(x.abs().mean().item() * 3) % 3
        for r in range(t):
            x = torch.tanh(x) * 0.9 + r
        return x


class ClampedDecoder(nn.Module):
    """``range(1, n + 1)`` over a clamped length, with a data-dependent ``break`` inside."""

    def __init__(self, dim: int = 6) -> None:
        super().__init__()
        self.step = nn.Linear(dim, dim)

    def forward(self, x):
        length = x.sum().clamp(min=0, max=3).long()
        outputs = []
        h = x
        for t in range(1, length.item() + 1):
            h = torch.sigmoid(self.step(h)) * t
            if h.mean() > 1.4:
                break
            outputs.append(h)
        if not outputs:
            return x
        return torch.stack(outputs).sum(0)


class PositiveFeatures(nn.Module):
    """As many smoothing steps as the first sample has positive features: a count of a static dim."""

    def forward(self, x):
        k = (x[0] > 0).sum()
        for _ in range(k):
            x = 0.5 * (x + x.roll(1, dims=1))
        return x


class StrongestFeatureSteps(nn.Module):
    """Steps up to the index of the strongest feature of the first sample (an argmax over a static dim)."""

    def forward(self, x):
        idx = x.abs().argmax(dim=1)[0]
        for i in range(idx.item()):
            x = x - 0.1 * x[:, i:i + 1]
        return x


def _trips(model: nn.Module, x: torch.Tensor) -> int:
    """How many iterations eager's loop runs on ``x`` (read from the model's own expression)."""
    if isinstance(model, PonderNet):
        return int(model.halt(x).argmax(dim=-1)[0])
    if isinstance(model, CappedRefiner):
        return min(int(x.abs().sum().item()), model.max_iters)
    if isinstance(model, RemainderSteps):
        return int(x.abs().mean().item() * 3) % 3
    if isinstance(model, PositiveFeatures):
        return int((x[0] > 0).sum())
    if isinstance(model, StrongestFeatureSteps):
        return int(x.abs().argmax(dim=1)[0])
    return int(x.sum().clamp(min=0, max=3).long())


def _inputs(shape: tuple[int, ...], scales: list[float], seed: int = 0, count: int = 3) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator) * s + shift for s in scales for shift in (-0.3, 0.0, 0.4)
            for _ in range(count)]


@pytest.mark.parametrize("make, shape, scales, trip_counts", [
    (PonderNet, (2, 8), [0.5, 1.0, 3.0], 3),
    (CappedRefiner, (2, 6), [0.02, 0.08, 0.2, 0.4, 1.0], 4),
    (RemainderSteps, (3, 4), [0.2, 0.5, 0.8, 1.2, 2.0], 3),
    (ClampedDecoder, (2, 6), [0.1, 0.3, 0.6, 1.0], 4),
    (PositiveFeatures, (2, 5), [0.5, 1.0, 2.0], 4),
    (StrongestFeatureSteps, (3, 5), [0.5, 1.0, 2.0], 4),
])
def test_a_loop_whose_count_from_data_has_a_static_cap_agrees_with_eager(make, shape, scales, trip_counts,
                                                                          tmp_path):
    torch.manual_seed(1)
    model = make().eval()
    inputs = _inputs(shape, scales)
    with torch.no_grad():
        seen = {_trips(model, x) for x in inputs}
    assert len(seen) >= trip_counts, seen  # the inputs run several different numbers of iterations
    paths = assert_agrees_in_process_and_as_host(model, inputs, tmp_path, atol=1e-5, min_paths=2)
    assert paths >= trip_counts, paths


def _line_of(model_class: type, text: str) -> int:
    lines, first = inspect.getsourcelines(model_class.forward)
    return first + next(i for i, line in enumerate(lines) if text in line)


class Uncapped(nn.Module):
    def forward(self, x):
        for _ in range(int(x.sum().item())):
            x = x * 0.5
        return x


class CappedOnOneBranchOnly(nn.Module):
    """The cap holds on one branch; after the ``if`` the count may be either: no static cap."""

    def forward(self, x):
        if x.mean() > 0:
            n = min(int(x.abs().sum()), 3)
        else:
            n = int(x.abs().sum())
        for _ in range(n):
            x = x * 0.5
        return x


class CappedBesideTheLoop(nn.Module):
    """The capped ``n`` is assigned in the branch beside the loop's: the loop reads the uncapped one."""

    def forward(self, x):
        n = int(x.abs().sum())
        if x.mean() > 0:
            n = min(n, 2)
        else:
            for _ in range(n):
                x = x * 0.5
        return x


class CountOfAnInput(nn.Module):
    """A count of an input's elements: its size is not known when loops are unrolled."""

    def forward(self, x):
        for _ in range((x > 0).sum()):
            x = x * 0.5
        return x


@pytest.mark.parametrize("model_class, text", [
    (Uncapped, "for _ in range(int(x.sum().item()))"),
    (CappedOnOneBranchOnly, "for _ in range(n)"),
    (CappedBesideTheLoop, "for _ in range(n)"),
    (CountOfAnInput, "for _ in range((x > 0).sum())"),
])
def test_a_count_from_data_without_a_provable_cap_is_refused_at_its_line(model_class, text):
    with pytest.raises(dycl.UnsupportedError) as caught:
        dycl.compile(model_class().eval(), torch.randn(2, 3))
    message = str(caught.value)
    assert "a for loop over range(n) whose n comes from the input and has no static upper bound" in message
    assert f"{__file__}:{_line_of(model_class, text)}" in message
    assert "range(min(n, self.max_steps))" in message  # the hint: how to cap it
