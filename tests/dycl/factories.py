"""``pkg.mod:factory`` models for the CLI tests, written the way users write them."""

from __future__ import annotations

import torch
import torch.nn as nn

from tests.dycl.test_harness_cli import Exit


def exit_model():
    torch.manual_seed(0)
    return Exit().eval(), torch.randn(1, 4)


class EarlyExitCNN(nn.Module):
    """A small early-exit CNN whose exit threshold no random input reaches."""

    def __init__(self, threshold: float = 0.99):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.exit_head = nn.Linear(8, 4)
        self.body = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        self.head = nn.Linear(8, 4)
        self.threshold = threshold

    def forward(self, x):
        h = self.stem(x)
        early = self.exit_head(h.mean(dim=(2, 3)))
        if early.softmax(-1).max() > self.threshold:  # the early exit
            return early
        return self.head(self.body(h).mean(dim=(2, 3)))


def rare_exit_model():
    torch.manual_seed(0)
    return EarlyExitCNN().eval(), torch.randn(1, 3, 8, 8)


def sequential_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3)), torch.randn(1, 3, 8, 8)


class Unsupported(nn.Module):
    def forward(self, x):
        try:
            if x.sum() > 0:
                raise RuntimeError("positive")
            return x + 1
        except RuntimeError:
            return x


def unsupported_model():
    return Unsupported(), torch.randn(1, 4)


def function_model():
    return (lambda x: x * 2), torch.randn(1, 4)


def list_example_model():
    return nn.Linear(4, 2), [torch.randn(1, 4)]


def model_only():
    return nn.Linear(4, 2)
