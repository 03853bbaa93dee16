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


class StandardisedEarlyExitCNN(nn.Module):
    """A small CNN with two confidence exits, written for one image: it standardises
    the image over the whole tensor, and its last stage flattens everything with
    ``view(-1)`` and takes the profile of its cumulative energy (``cumsum``, which dycl
    does not prove per sample on a flattened value). ``calibrate`` sets the thresholds
    so that the exits split samples."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(4)
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.exit1 = nn.Linear(8 * 2 * 2, 5)
        self.conv2, self.bn2 = nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.exit2 = nn.Linear(8 * 4 * 4, 5)
        self.conv3 = nn.Conv2d(8, 2, 1)
        self.fc = nn.Linear(16, 5)
        self.t1, self.t2 = 2.0, 2.0  # no exit until calibrated

    def stages(self, img):
        img = (img - img.mean()) / (img.std() + 1e-6)
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(img))), 2)
        out1 = self.exit1(torch.flatten(F.adaptive_avg_pool2d(x, 2), 1))
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return x, out1, self.exit2(x.view(x.size(0), -1))

    def forward(self, img):
        img = (img - img.mean()) / (img.std() + 1e-6)
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(img))), 2)
        out1 = self.exit1(torch.flatten(F.adaptive_avg_pool2d(x, 2), 1))
        if F.softmax(out1, dim=1).max() > self.t1:
            return out1, 1
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        out2 = self.exit2(x.view(x.size(0), -1))
        if torch.max(F.softmax(out2, dim=1)) > self.t2:
            return out2, 2
        feat = torch.relu(self.conv3(x)).view(-1)
        energy = (feat * feat).cumsum(0)
        return self.fc(energy[-16:] / (energy[-1] + 1e-6)).unsqueeze(0), 3

    @torch.no_grad()
    def calibrate(self, images) -> None:
        """Thresholds at the medians of the exits' confidences over ``images``."""
        first, second = [], []
        for img in images:
            _, out1, out2 = self.stages(img)
            first.append(F.softmax(out1, dim=1).max())
            second.append(F.softmax(out2, dim=1).max())
        self.t1 = float(torch.stack(first).median())
        going_on = [c for c, f in zip(second, first) if f <= self.t1]
        self.t2 = float(torch.stack(going_on).median())


class ConfiguredScale(nn.Module):
    """A dict of settings updated on the host per sample and read by the tensor code."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(6)
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = torch.tanh(self.fc(x))
        cfg = {"scale": 2, "shift": 1}
        if h.sum() > 0:
            cfg["scale"] = 3
        return h * cfg["scale"] + cfg["shift"]


class NormalisedPolicyNet(nn.Module):
    """Written for one sample: normalise by the whole tensor's norm, a policy head whose
    ``probs[0][i]`` gates each block (BlockDrop's lookups), a flattened linear head and
    an early exit on the flattened logits' maximum."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(11)
        self.policy = nn.Linear(12, 3)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(12, 12), nn.Tanh()) for _ in range(3))
        self.exit = nn.Linear(12, 4)
        self.head = nn.Linear(2 * 12, 4)

    def forward(self, x):
        x = x / x.norm()
        probs = torch.sigmoid(self.policy(x) * 4)
        for i, block in enumerate(self.blocks):
            if probs[0][i] > 0.5:
                x = x + block(x)
        logits = self.exit(x).view(-1)
        if logits.max() > 0.6:
            return logits.unsqueeze(0)
        feat = torch.cat([x, x * x], dim=1).view(-1)
        return self.head(feat).unsqueeze(0)
