"""A list collected in a loop with a data-dependent ``break``, then tested for being empty
(``if parts:``, ``if len(feats) > 0``, ``if not outs``): its length is a function of the
path (``hcfg.path_lengths``), so each explored state enters only the branch its length
takes, and ``torch.stack([])`` is never run on the example. In process and as the
torch-free host, on inputs that stop at several depths, the empty list among them."""

from __future__ import annotations

import torch
import torch.nn as nn

from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host


class StopWhenLarge(nn.Module):
    """Keeps each layer's output until one grows too large; averages what it kept."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(4)])
        for layer in self.layers:
            nn.init.orthogonal_(layer.weight, gain=1.8)

    def forward(self, x):
        parts = []
        for layer in self.layers:
            x = layer(x)
            if x.abs().mean() > 1.0:
                break
            parts.append(x)
        if parts:
            return torch.stack(parts).mean(0)
        return x


class FeaturePyramid(nn.Module):
    """Concatenates the features of the stages it ran before the gate said stop."""

    def __init__(self, depth: int = 3):
        super().__init__()
        self.stages = nn.ModuleList(nn.Sequential(nn.Linear(6, 6), nn.Tanh()) for _ in range(depth))
        self.gate = nn.Linear(6, 1)
        self.fallback = nn.Linear(6, 6 * depth)

    def forward(self, h):
        feats = []
        for stage in self.stages:
            if torch.sigmoid(self.gate(h)).mean() < 0.5:
                break
            h = stage(h)
            feats.append(h)
            if h.sum() > 2:
                break
        if len(feats) > 0:
            out = torch.cat(feats, dim=-1)
            return out.sum(-1)
        return self.fallback(h).sum(-1)


class Collector(nn.Module):
    """``if not outs`` before the collected tensors are read."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(5, 5), nn.Linear(5, 5)])

    def forward(self, x):
        outs = []
        for block in self.blocks:
            y = torch.relu(block(x))
            if y.max() <= 0.5:
                break
            outs.append(y)
            x = y
        if not outs:
            return x * 0.0 - 1.0
        return outs[-1] + torch.stack(outs, 0).sum(0)


def _scaled(shape: tuple[int, ...], n: int, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator) * (0.05 * 1.6 ** (i % 12)) for i in range(n)]


def test_stack_of_a_list_cut_by_break(tmp_path):
    torch.manual_seed(0)
    paths = assert_agrees_in_process_and_as_host(StopWhenLarge(), _scaled((2, 8), 36, 1), tmp_path,
                                                 atol=1e-5, min_paths=3)
    assert paths >= 3


def test_cat_guarded_by_len(tmp_path):
    torch.manual_seed(1)
    paths = assert_agrees_in_process_and_as_host(FeaturePyramid(), _scaled((3, 6), 36, 2), tmp_path,
                                                 atol=1e-5, min_paths=3)
    assert paths >= 3


def test_not_outs_before_reading_them(tmp_path):
    torch.manual_seed(2)
    paths = assert_agrees_in_process_and_as_host(Collector(), _scaled((1, 5), 36, 3), tmp_path,
                                                 atol=1e-5, min_paths=3)
    assert paths >= 3
