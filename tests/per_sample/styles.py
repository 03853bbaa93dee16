"""Per-sample test models written the way people write early exits and skip gates in the
wild (not the zoo's style): a BranchyNet-like entropy exit inside a ``zip`` loop, a SkipNet-like
residual gate read with ``.item()`` that counts the blocks it ran, and an adaptive-computation
loop that accumulates a Python float and ``break``s."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class EntropyExitCNN(nn.Module):
    """Stages with a classifier each; a sample leaves at the first whose prediction entropy is low."""

    def __init__(self, thresholds: tuple[float, ...] = (1.5, 1.57)) -> None:
        super().__init__()
        torch.manual_seed(11)
        widths = [3, 8, 12, 16]
        self.stages = nn.ModuleList(
            nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2))
            for cin, cout in zip(widths, widths[1:]))
        self.exits = nn.ModuleList(nn.Linear(c, 5) for c in widths[1:])
        self.thresholds = thresholds

    def forward(self, images):
        x = images
        for stage, classifier, threshold in zip(self.stages, self.exits, self.thresholds):
            x = stage(x)
            logits = classifier(x.mean(dim=(2, 3)))
            probs = F.softmax(logits, dim=1)
            entropy = -(probs * torch.log(probs + 1e-8)).sum()
            if entropy < threshold:
                return logits
        x = self.stages[-1](x)
        return self.exits[-1](torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class GatedResidualCNN(nn.Module):
    """Residual blocks, each run only where its gate (a pooled linear probe) says so."""

    def __init__(self, blocks: int = 3, channels: int = 8) -> None:
        super().__init__()
        torch.manual_seed(12)
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1), nn.ReLU(),
                          nn.Conv2d(channels, channels, 3, padding=1)) for _ in range(blocks))
        self.gates = nn.ModuleList(nn.Linear(channels, 1) for _ in range(blocks))
        self.fc = nn.Linear(channels, 4)
        for gate, bias in zip(self.gates, (0.2, -0.05, 0.35)):
            nn.init.constant_(gate.bias, bias)

    def forward(self, x):
        x = F.relu(self.stem(x))
        executed = 0
        for i, block in enumerate(self.blocks):
            gate = torch.sigmoid(self.gates[i](x.mean(dim=(2, 3))))
            if gate.item() > 0.5:
                x = F.relu(x + block(x))
                executed += 1
        return self.fc(x.mean(dim=(2, 3))), executed


class PonderMLP(nn.Module):
    """A recurrent cell applied until the accumulated halting probability passes 1.2 (at most 4 steps)."""

    def __init__(self, features: int = 6, hidden: int = 16) -> None:
        super().__init__()
        torch.manual_seed(13)
        self.encode = nn.Linear(features, hidden)
        self.cell = nn.GRUCell(hidden, hidden)
        self.halt = nn.Linear(hidden, 1)
        self.out = nn.Linear(hidden, 3)
        nn.init.normal_(self.halt.weight, std=1.5)

    def forward(self, x):
        h = torch.tanh(self.encode(x))
        state = torch.zeros_like(h)
        halting, steps = 0.0, 0
        while steps < 4:
            state = self.cell(h, state)
            steps += 1
            halting += torch.sigmoid(self.halt(state)).item()
            if halting > 1.2:
                break
        return self.out(state), steps
