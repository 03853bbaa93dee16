"""Constructs people write in forward() that dycl compiles instead of refusing (issue 27),
each in a model written the way its authors write it, compared with eager on inputs that
take several paths, in-process and as a torch-free host."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

import dycl
from dycl.testing import assert_equivalent
from dycl.testing_host import run_host_without_torch


def varied(*shape: int, count: int, seed: int) -> list[torch.Tensor]:
    """Inputs of several scales and signs, so that data-dependent tests go both ways."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator) * (0.1 + i % 4) * (-1) ** (i // 2) for i in range(count)]


def agree(model: nn.Module, example, inputs, tmp_path, atol: float = 1e-5, **options) -> int:
    """Compile ``model``; assert it agrees with eager in-process and as a torch-free host on
    ``inputs``; the number of distinct eager paths they took."""
    compiled = dycl.compile(model, example, **options)
    paths = assert_equivalent(model, compiled, inputs, min_paths=2, atol=atol)
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, atol)
    assert report["checked"] == len(inputs) and not report["problems"], report
    return paths


# -- try/except/finally -----------------------------------------------------------------------------


class InternalClassifier(nn.Module):
    """The shape of ShallowDeep-Nets' internal classifiers: a try around the linear head."""

    def __init__(self, channels: int, classes: int) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.linear = nn.Linear(channels * 4, classes)

    def forward(self, x):
        maxp = self.pool(x)
        try:
            out = self.linear(maxp.view(maxp.size(0), -1))
        except:  # noqa: E722 - as the authors wrote it
            print(maxp.shape)
            out = None
        return out


class ShallowDeep(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stages = nn.ModuleList([nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU()),
                                     nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())])
        self.exits = nn.ModuleList([InternalClassifier(8, 5), InternalClassifier(8, 5)])
        self.confidence_threshold = 0.27

    def forward(self, x):
        for layer, head in zip(self.stages, self.exits):
            x = layer(x)
            out = head(x)
            try:
                confidence = F.softmax(out, dim=1).max()
            finally:
                pass
            if confidence >= self.confidence_threshold:
                return out, True
        return out, False


def test_try_around_a_linear_head_compiles(tmp_path):
    torch.manual_seed(0)
    model = ShallowDeep().eval()
    inputs = varied(1, 3, 8, 8, count=12, seed=3)
    assert agree(model, inputs[0], inputs, tmp_path) >= 2


class GuardedNorm(nn.Module):
    """try/except/else/finally in a helper, around tensor code."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(6, 6)

    def _normalise(self, h):
        try:
            scale = h.norm(dim=-1, keepdim=True)
        except RuntimeError as error:
            raise ValueError("bad activation") from error
        else:
            h = h / (scale + 1e-6)
        finally:
            h = h.clamp(-1, 1)
        return h

    def forward(self, x):
        h = self._normalise(self.proj(x))
        if h.sum() > 0:
            return h * 2
        return h - 1


def test_try_except_else_finally_in_a_helper(tmp_path):
    torch.manual_seed(1)
    model = GuardedNorm().eval()
    inputs = varied(3, 6, count=12, seed=4)
    assert agree(model, inputs[0], inputs, tmp_path) >= 2


# -- loops bounded by a counter ---------------------------------------------------------------------


class Refiner(nn.Module):
    """Iterative refinement until the update is small, at most ``max_iters`` times."""

    def __init__(self, max_iters: int = 4) -> None:
        super().__init__()
        self.correction = nn.Linear(8, 8)
        self.max_iters = max_iters
        self.tol = 0.6

    def forward(self, x):
        steps = 0
        delta = self.correction(x)
        while delta.abs().mean() > self.tol and steps < self.max_iters:
            x = 0.6 * x - 0.1 * delta
            delta = self.correction(x)
            steps += 1
        return x, steps


def test_while_with_a_tensor_test_and_a_counter(tmp_path):
    torch.manual_seed(2)
    model = Refiner().eval()
    inputs = [x * 3 for x in varied(2, 8, count=16, seed=5)]
    assert agree(model, inputs[0], inputs, tmp_path) >= 3


class Halting(nn.Module):
    """A halting loop: counter bound, tensor condition as a break."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.GRUCell(6, 6)
        self.halt = nn.Linear(6, 1)

    def forward(self, x):
        h = torch.zeros_like(x)
        n = 0
        while n < 3:
            h = self.cell(x, h)
            n += 1
            if torch.sigmoid(self.halt(h)).mean() > 0.6:
                break
        return h


def test_while_counter_with_a_tensor_break(tmp_path):
    torch.manual_seed(3)
    model = Halting().eval()
    inputs = [x * 3 for x in varied(1, 6, count=16, seed=6)]
    assert agree(model, inputs[0], inputs, tmp_path) >= 2
