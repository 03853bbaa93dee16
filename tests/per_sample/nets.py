"""Small single-sample models written the way people write them (not the zoo)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class EarlyExitMLP(nn.Module):
    """Two exits; the first returns when its softmax is confident."""

    def __init__(self, threshold: float = 0.45) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.stem = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
        self.head1 = nn.Linear(16, 4)
        self.block = nn.Sequential(nn.Linear(16, 16), nn.Tanh())
        self.head2 = nn.Linear(16, 4)
        self.threshold = threshold

    def forward(self, x):
        h = self.stem(x)
        logits = self.head1(h)
        if F.softmax(logits, dim=-1).max() > self.threshold:
            return logits
        h = self.block(h)
        if h.mean() > 0:
            return self.head2(h) * 2
        return self.head2(h)


class WholeTensorNorm(nn.Module):
    """Statements that reduce over the whole tensor (batch dim included) and flatten it."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.proj = nn.Linear(5, 5)

    def forward(self, x):
        x = self.proj(x)
        x = (x - x.mean()) / (x.std() + 1e-5)
        flat = x.view(-1)
        if flat[0] > 0:
            return flat * 2, x.size(0)
        return x.reshape(x.size(0), -1).abs() + x.max(), x.sum()


class GatedRefine(nn.Module):
    """A recurrent refinement loop that stops early; counts its steps on the host."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(2)
        self.cell = nn.GRUCell(6, 6)
        self.limit = 1.2

    def forward(self, x):
        h = torch.zeros_like(x)
        steps = 0
        for _ in range(4):
            h = self.cell(x, h)
            steps += 1
            if h.norm().item() > self.limit:
                break
        return h, steps


class TwoInputs(nn.Module):
    """Two per-sample inputs and a branch on both."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(3)
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 3)

    def forward(self, x, y):
        if (x * y).sum() > 0:
            return self.a(x) + y
        return self.b(y) - x
