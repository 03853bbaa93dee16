"""Small models for the dynamic-shape tests."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class ShapeBranchCNN(nn.Module):
    """A classifier whose path depends on the input's width, its batch size and its data."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.down = nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.same = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, 10)
        self.refine = nn.Linear(10, 10)

    def forward(self, x):
        if x.mean() > 0:  # data-dependent, one scalar over the whole batch
            x = x * 1.5
        x = F.relu(self.conv1(x))
        if x.shape[-1] > 24:  # large images are downsampled first
            x = F.relu(self.down(x))
        else:
            x = F.relu(self.same(x))
        if x.size(0) == 1:
            x = x * 2.0
        n = x.size(0)
        feat = F.adaptive_avg_pool2d(x, 1).view(n, -1)
        logits = self.fc(feat)
        if logits.sum() > 0:
            logits = self.refine(logits)
        return logits


class PerSampleCondition(nn.Module):
    """``if y.mean(1) > 0`` is only defined for a batch of one."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        y = self.fc(x)
        if y.mean(1) > 0:
            y = y * 2
        return y


class TwoInputs(nn.Module):
    """Two inputs sharing the batch dim."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 4)

    def forward(self, x, y):
        z = self.fc(x) + y
        if z.sum() > 0:
            z = z * 2
        return z
