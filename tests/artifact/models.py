"""Small models written the way people write them, for the artifact tests."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class Gate(nn.Module):
    """Two branches by the sign of the input's sum; returns logits and how many steps ran."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        steps = 0
        if x.sum() > 0:
            x = torch.relu(self.a(x))
            steps += 1
        else:
            x = torch.tanh(self.b(x))
        return self.head(x), steps


class EarlyExit(nn.Module):
    """A confidence-based early exit with a constant bias added on the long path."""

    def __init__(self, threshold: float = 0.6):
        super().__init__()
        self.stem = nn.Linear(6, 8)
        self.exit1 = nn.Linear(8, 3)
        self.deep = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))
        self.threshold = threshold

    def forward(self, x):
        h = F.relu(self.stem(x))
        early = self.exit1(h)
        if F.softmax(early, dim=-1).max() > self.threshold:
            return early
        bias = torch.full((1, 3), 0.25)
        return self.deep(h) + bias


def gate() -> Gate:
    torch.manual_seed(0)
    return Gate().eval()


def early_exit() -> EarlyExit:
    torch.manual_seed(1)
    return EarlyExit().eval()


def gate_inputs(count: int = 24, seed: int = 0) -> list[torch.Tensor]:
    """Both signs and several batch sizes."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(1 + i % 3, 4, generator=generator) + (0.5 if i % 2 else -0.5) for i in range(count)]


def early_exit_inputs(count: int = 24, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(1, 6, generator=generator) * (4.0 if i % 2 else 0.1) for i in range(count)]


class WarmStart(nn.Module):
    """A GRU step from a fixed initial state (a constant the host keeps in
    constants.bin), skipped when the projected input is already positive."""

    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(4, 4)
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        state = torch.zeros(1, 4) + 0.5
        x = self.proj(x)
        if x.sum() > 0:
            return x
        return self.cell(x, state)


def warm_start() -> WarmStart:
    torch.manual_seed(2)
    return WarmStart().eval()
