"""Fresh hunt, family 1: branches and loops on shapes, compiled at one shape and called
at others (unbatched inputs, widths, batch of one, ``len(x)`` and ``range(x.size(1))``)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.soundness.fresh_hunt import Case, at, check_case, seeded


class MaybeUnbatched(nn.Module):  # torchvision-style: accept CHW as well as NCHW
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        unbatched = False
        if x.dim() == 3:
            x = x.unsqueeze(0)
            unbatched = True
        y = F.relu(self.conv(x)).mean(dim=(2, 3))
        if unbatched:
            y = y.squeeze(0)
        return y


def _unbatched_inputs():
    g = seeded(1)
    out = []
    for i in range(52):
        hw = 5 + i % 4
        shape = (3, hw, hw) if i % 2 == 0 else (1 + i % 3, 3, hw, hw)
        out.append(torch.randn(*shape, generator=g))
    return out


class WideGetsPooled(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):  # x: (B, 8, L)
        if x.shape[-1] > 16:
            x = F.avg_pool1d(x, kernel_size=2)
        h = self.proj(x.transpose(1, 2))
        return h.mean(1)


def _width_inputs():
    g = seeded(2)
    return [torch.randn(1 + i % 3, 8, (8, 16, 17, 24, 33)[i % 5], generator=g) for i in range(50)]


class BatchOfOne(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        h = self.fc(x)
        if x.size(0) == 1:
            return h  # nothing to centre
        return h - h.mean(0, keepdim=True)


def _batch_inputs():
    g = seeded(3)
    return [torch.randn(1 + i % 4, 6, generator=g) for i in range(50)]


class PerItemLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 3)

    def forward(self, x):
        outs = []
        for i in range(len(x)):
            outs.append(self.fc(x[i]) * (i + 1))
        return torch.stack(outs)


def _per_item_inputs():
    g = seeded(4)
    return [torch.randn(1 + i % 5, 5, generator=g) for i in range(50)]


class TinyRNN(nn.Module):  # the "RNN from scratch" tutorial loop
    def __init__(self, n_in=4, n_hidden=6):
        super().__init__()
        self.i2h = nn.Linear(n_in, n_hidden)
        self.h2h = nn.Linear(n_hidden, n_hidden)
        self.n_hidden = n_hidden

    def forward(self, x):  # x: (B, T, n_in)
        h = torch.zeros(x.size(0), self.n_hidden)
        for t in range(x.size(1)):
            h = torch.tanh(self.i2h(x[:, t]) + self.h2h(h))
        return h


def _rnn_inputs():
    g = seeded(5)
    return [torch.randn(1 + i % 2, 2 + i % 6, 4, generator=g) for i in range(50)]


class PadToMultiple(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x):  # x: (B, L), L padded up to a multiple of 8 and folded
        pad = (8 - x.shape[-1] % 8) % 8
        if pad:
            x = F.pad(x, (0, pad), value=0.0)
        x = x.view(x.size(0), -1, 8)
        return self.fc(x).sum(1)


def _pad_inputs():
    g = seeded(6)
    return [torch.randn(2, (8, 5, 13, 16, 3)[i % 5], generator=g) for i in range(50)]


class NumelSwitch(nn.Module):
    def forward(self, x):
        n = x.numel()
        if n % 2 == 0:
            pairs = x.reshape(-1, 2)
            return pairs[:, 0] * pairs[:, 1]
        return x.flatten() * 2


def _numel_inputs():
    g = seeded(7)
    return [torch.randn(1 + i % 3, (3, 4, 5)[i % 3], generator=g) for i in range(51)]


class ScaledSelfAttention(nn.Module):  # 1/sqrt(d) from a shape; a branch on the length
    def forward(self, q):
        scale = 1 / math.sqrt(q.size(-1))
        w = (q @ q.transpose(-1, -2)) * scale
        if q.size(1) > 3:
            w = w / 2
        return w.softmax(-1) @ q


def _attention_inputs():
    g = seeded(8)
    return [torch.randn(2, (2, 3, 5, 7)[i % 4], 8, generator=g) for i in range(52)]


class LearnedPositions(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("pe", torch.randn(1, 16, 4))

    def forward(self, x):
        x = x + self.pe[:, : x.size(1)]
        if x.size(1) % 2:
            return x[:, :-1]
        return x


def _position_inputs():
    g = seeded(9)
    return [torch.randn(1 + i % 2, 2 + i % 9, 4, generator=g) for i in range(54)]


class HalfSplit(nn.Module):
    def forward(self, x):
        half = x.size(1) // 2
        a, b = x[:, :half], x[:, half:]
        if a.shape[1] == b.shape[1]:
            return a - b
        return a.sum(1) - b.sum(1)


def _split_inputs():
    g = seeded(10)
    return [torch.randn(2, 4 + i % 5, generator=g) for i in range(50)]


class SqueezeHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x):
        h = self.fc(x).squeeze()  # a batch of one squeezes to 0-d
        if h.dim() == 0:
            return h.unsqueeze(0)
        return h


def _squeeze_inputs():
    g = seeded(11)
    return [torch.randn((2, 1, 3)[i % 3], 4, generator=g) for i in range(51)]


CASES = {
    "maybe_unbatched": Case(MaybeUnbatched, _unbatched_inputs, 2,
                            refused=at("fails on the example", "y = F.relu(self.conv(x))")),
    "wide_gets_pooled": Case(WideGetsPooled, _width_inputs, 2, refused=r"\(dimension 2 is static: 8\)"),
    "batch_of_one": Case(BatchOfOne, _batch_inputs, 2),
    "per_item_loop": Case(PerItemLoop, _per_item_inputs, 5,
                          refused=at(r"for loop over range\(n\) whose n comes", "for i in range(len(x)):")),
    # unrolled to the example's 2 steps (dim 1 is static: rewriter.tensor_rows); other lengths are refused
    "tiny_rnn": Case(TinyRNN, _rnn_inputs, 6, refused=r"got \[2, 3, 4\] \(dimension 1 is static: 2\)"),
    "pad_to_multiple": Case(PadToMultiple, _pad_inputs, 2, refused=r"got \[2, 5\] \(dimension 1 is static: 8\)"),
    "scaled_self_attention": Case(ScaledSelfAttention, _attention_inputs, 2, dynamic="all",
                                  refused=r"valid for sizes where \(q_d1 == 2\)"),
    "learned_positions": Case(LearnedPositions, _position_inputs, 2, dynamic="all"),
    "half_split": Case(HalfSplit, _split_inputs, 2, dynamic="all"),
    "squeeze_head": Case(SqueezeHead, _squeeze_inputs, 2,
                         refused=r"valid for sizes where \(batch != 1\)"),  # dycl.backends.onnx_squeeze
    "numel_switch": Case(NumelSwitch, _numel_inputs, 2, refused=at("fails on the example", "pairs = x.reshape(-1, 2)")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_shape_dependent(name, tmp_path):
    case = CASES[name]
    assert check_case(case, tmp_path) == case.paths
