"""Fresh hunt, family 11: sizes from data through operators the first data-shapes hunt did not
try (``repeat_interleave`` with tensor repeats, ``narrow`` and ``split`` with sizes from
``int()``, ``F.pad`` by a count, ``torch.arange``/``torch.zeros`` of a count, ``index_select``
with ``nonzero`` columns, ``unique(return_counts=True)``, a boolean-mask write)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.soundness.fresh_hunt import Case, check_case, seeded


class RepeatByMagnitude(nn.Module):
    def forward(self, x):  # x: (3,)
        reps = (x.abs() * 2).long().clamp(0, 3)
        y = torch.repeat_interleave(x, reps)
        if y.numel() > 4:
            return y.cumsum(0)
        return y * 2


class WindowAtPeak(nn.Module):
    def forward(self, x):  # x: (8,)
        start = min(int(x.argmax()) // 2, 5)
        y = x.narrow(0, start, 3)
        if y.sum() > 0:
            return y * 2
        return y


class RotatePositives(nn.Module):
    def forward(self, x):  # x: (6,)
        n = int((x > 0).sum())
        if n == 0 or n == 6:
            return x
        a, b = x.split([n, 6 - n])
        return torch.cat([b, a])


class PadByCount(nn.Module):
    def forward(self, x):  # x: (4,)
        y = F.pad(x, (0, int((x > 0).sum())))
        if y.shape[0] > 6:
            return y.sum()
        return y.mean()


class PositionsOfCount(nn.Module):
    def forward(self, x):
        n = int(x.abs().sum().item()) % 5 + 1
        pos = torch.arange(n, dtype=x.dtype)
        if n > 2:
            return pos * x.mean()
        return pos


class ZerosOfCount(nn.Module):
    def forward(self, x):
        n = int((x > 0).sum())
        z = torch.zeros(n, 2)
        if n > 3:
            return z + x.mean()
        return z - 1


class PositiveColumns(nn.Module):
    def forward(self, x):  # x: (2, 4)
        cols = (x.sum(0) > 0).nonzero().squeeze(1)
        y = x.index_select(1, cols)
        if y.shape[1] >= 2:
            return y.mean(1)
        return x.mean(1)


class MostFrequent(nn.Module):
    def forward(self, x):  # integer labels (6,)
        vals, counts = torch.unique(x, return_counts=True)
        if counts.max() > 2:
            return vals[counts.argmax()]
        return vals.sum()


class DoublePositives(nn.Module):
    def forward(self, x):
        m = x > 0
        out = torch.zeros_like(x)
        out[m] = x[m] * 2
        if m.sum() > 4:
            return out
        return -out


def _inputs(seed, shape, spread=0.8):
    def make():
        g = seeded(seed)
        return [torch.randn(*shape, generator=g) + (i % 3 - 1) * spread for i in range(51)]
    return make


def _labels():
    g = seeded(119)
    return [torch.randint(0, 4, (6,), generator=g) for _ in range(50)]


CASES = {
    "repeat_interleave": Case(RepeatByMagnitude, _inputs(111, (3,)), 2),
    "narrow_at_peak": Case(WindowAtPeak, _inputs(112, (8,)), 2),
    "split_sizes": Case(RotatePositives, _inputs(113, (6,), 2.0), 2),
    "pad_by_count": Case(PadByCount, _inputs(114, (4,)), 2),
    "arange_of_count": Case(PositionsOfCount, _inputs(115, (3,)), 2),
    "zeros_of_count": Case(ZerosOfCount, _inputs(116, (2, 4)), 2),
    "index_select_nonzero": Case(PositiveColumns, _inputs(117, (2, 4)), 2),
    "unique_counts": Case(MostFrequent, _labels, 2),
    "mask_write": Case(DoublePositives, _inputs(118, (2, 4)), 2),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_size_from_data(name, tmp_path):
    case = CASES[name]
    assert check_case(case, tmp_path) == case.paths
