"""Fresh hunt, family 5: numeric edge inputs (NaN and inf, ties in ``argmax``/``max``,
all-zero inputs, a threshold hit exactly, integer and bool inputs, float64, negative
integer division and negative indices computed from data)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from tests.soundness.fresh_hunt import Case, check_case, seeded


class NanGuard(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        if torch.isnan(x).any():
            x = torch.nan_to_num(x, nan=0.0)
        if torch.isinf(x).any():
            x = x.clamp(-10, 10)
        return self.fc(x)


def _nan_inputs():
    g = seeded(41)
    out = []
    for i in range(52):
        x = torch.randn(2, 4, generator=g)
        if i % 4 == 1:
            x[0, 1] = float("nan")
        if i % 4 == 2:
            x[1, 2] = float("inf") if i % 8 == 2 else float("-inf")
        out.append(x)
    return out


class TiedArgmax(nn.Module):
    def forward(self, x):  # x: (B, C) with ties
        label = x.argmax(-1)
        best, where = x.max(0)
        if where[0] == 0:
            return label, best
        return label + 10, best


def _tie_inputs():
    g = seeded(42)
    return [torch.randint(0, 3, (3, 4), generator=g).float() for _ in range(50)]


class SafeNormalize(nn.Module):
    def forward(self, x):
        if x.abs().sum() == 0:
            return x
        return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def _zero_inputs():
    g = seeded(43)
    return [torch.zeros(2, 3) if i % 3 == 0 else torch.randn(2, 3, generator=g) for i in range(51)]


class ExactThreshold(nn.Module):
    def forward(self, x):
        if x.mean() >= 0.5:
            return torch.where(x > 0.5, x, torch.zeros_like(x))
        return x - 0.5


def _threshold_inputs():
    g = seeded(44)
    out = []
    for i in range(50):
        if i % 3 == 0:
            out.append(torch.full((2, 2), 0.5))
        elif i % 3 == 1:
            out.append(torch.tensor([[0.25, 0.75], [0.5, 0.5]]) + 0.01 * (i % 2))
        else:
            out.append(torch.rand(2, 2, generator=g))
    return out


class TokenBuckets(nn.Module):  # integer input: bucketing, floor division and modulo of signed ids
    def forward(self, ids):
        if (ids < 0).any():
            bucket = ids // 3
            rest = ids % 3
        else:
            bucket = ids // 2
            rest = torch.remainder(ids, 2)
        return bucket * 10 + rest


def _token_inputs():
    g = seeded(45)
    return [torch.randint(-7 if i % 2 else 0, 9, (6,), generator=g) for i in range(50)]


class MaskedMean(nn.Module):
    def forward(self, x, mask):  # mask: bool
        if not mask.any():
            return x.mean(0)
        count = mask.sum()
        return (x * mask.unsqueeze(-1)).sum(0) / count


def _mask_inputs():
    g = seeded(46)
    return [(torch.randn(4, 3, generator=g), torch.rand(4, generator=g) < (0.0 if i % 4 == 0 else 0.5))
            for i in range(52)]


class Float64Solver(nn.Module):
    def forward(self, x):  # x: float64
        if x.sum() > 0:
            return torch.exp(x) - 1
        return x.cumsum(0) * 1e-3


def _float64_inputs():
    g = seeded(47)
    return [torch.randn(5, generator=g, dtype=torch.float64) * 3 for _ in range(50)]


class PreviousClassLookup(nn.Module):  # "previous" class via index - 1, wrapping at 0
    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.randn(4, 3))

    def forward(self, x):  # x: (B, 4)
        prev = x.argmax(-1) - 1
        rows = self.table[prev]
        if (prev < 0).any():
            return rows * 2
        return rows


def _previous_inputs():
    g = seeded(48)
    return [torch.randn(3, 4, generator=g) for _ in range(50)]


class PeakGate(nn.Module):  # a sensor-style guard on the peak value; NaN readings reach it
    def forward(self, x):
        peak = x.max()
        if peak > 2.0:
            return x / peak
        if torch.isnan(peak):
            return torch.zeros_like(x)
        return x


def _peak_inputs():
    g = seeded(49)
    out = []
    for i in range(52):
        x = torch.randn(2, 4, generator=g) * (1 + i % 3)
        if i % 4 == 1:
            x[1, 3] = float("nan")
        if i % 4 == 2:
            x[0, 0], x[1, 1] = float("inf"), float("nan")
        out.append(x)
    return out


class RowWinners(nn.Module):  # per-row max, argmax, amin over rows that may hold NaN
    def forward(self, x):
        best, where = x.max(dim=-1)
        low = x.amin(dim=0, keepdim=True)
        label = x.argmax(-1)
        if not torch.isnan(best).any():
            return best, label, low, x.argmin()
        return best, where, low, x.min(0).indices


def _winner_inputs():
    g = seeded(50)
    out = []
    for i in range(50):
        x = torch.randn(3, 5, generator=g)
        for j in range(i % 3):
            x[j, (i + 2 * j) % 5] = float("nan")
        if i % 5 == 0:
            x[2, 4] = float("inf")
        out.append(x)
    return out


class HalfStepBins(nn.Module):  # floor division of signed floats (quantisation bins)
    def forward(self, x):
        bins = x // 0.5
        if bins.min() < -2:
            return bins, torch.floor_divide(x, -0.75)
        return bins, x // bins.clamp(min=1.0)


def _bin_inputs():
    g = seeded(51)
    return [torch.randn(6, generator=g) * (0.5 + i % 4) for i in range(50)]


class PriceTicks(nn.Module):  # prices snapped to 0.7-wide ticks; exact multiples and negatives
    def forward(self, x):
        ticks = torch.div(x, 0.7, rounding_mode="floor")
        toward_zero = torch.div(x, 0.7, rounding_mode="trunc")
        if (ticks != toward_zero).any():
            return ticks, toward_zero
        return ticks * 0.7, x // 0.7


def _tick_inputs():
    g = seeded(52)
    exact = torch.tensor([0.7, 1.4, 2.1, 4.9, 7.0, -1.4])
    return [exact * (1 if i % 3 else -1) if i % 2 else torch.rand(6, generator=g) * 10 for i in range(50)]


class SparseActivity(nn.Module):  # ``any``/``all`` on float activations
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = torch.relu(self.fc(x))
        alive = h.any(dim=-1)
        if alive.all() and h[:, :2].all():
            return h, alive
        return h * alive.unsqueeze(-1), h.any(0)


def _activity_inputs():
    g = seeded(53)
    return [torch.randn(3, 4, generator=g) * (0.1 + i % 5) + (3.0 if i % 7 == 0 else 0.0) for i in range(50)]


class TimestampWindow(nn.Module):  # nanosecond timestamps (int64 beyond 32 bits) cut to a window
    def forward(self, stamps, start, end):
        inside = torch.minimum(torch.maximum(stamps, start), end)
        if (inside == stamps).all():
            return inside - start, stamps.max() - stamps.min(), stamps.unsqueeze(0).max(1).values
        return inside, torch.max(stamps - end, torch.zeros_like(stamps)), torch.min(stamps, end)


def _timestamp_inputs():
    g = seeded(54)
    base = 1_700_000_000_000_000_000
    out = []
    for i in range(50):
        stamps = base + torch.randint(0, 10**10, (5,), generator=g)
        start = torch.tensor(base + (0 if i % 2 else 3 * 10**9))
        out.append((stamps, start, start + 6 * 10**9))
    return out


CASES = {
    "nan_guard": Case(NanGuard, _nan_inputs, 3),
    "tied_argmax": Case(TiedArgmax, _tie_inputs, 2),
    "safe_normalize": Case(SafeNormalize, _zero_inputs, 2),
    "exact_threshold": Case(ExactThreshold, _threshold_inputs, 2),
    "token_buckets": Case(TokenBuckets, _token_inputs, 2),
    "masked_mean": Case(MaskedMean, _mask_inputs, 2),
    "float64_solver": Case(Float64Solver, _float64_inputs, 2),
    "previous_class_lookup": Case(PreviousClassLookup, _previous_inputs, 2),
    "peak_gate": Case(PeakGate, _peak_inputs, 3),
    "row_winners": Case(RowWinners, _winner_inputs, 2),
    "half_step_bins": Case(HalfStepBins, _bin_inputs, 2),
    "price_ticks": Case(PriceTicks, _tick_inputs, 2),
    "sparse_activity": Case(SparseActivity, _activity_inputs, 2),
    "timestamp_window": Case(TimestampWindow, _timestamp_inputs, 2),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_numeric_edges(name, tmp_path):
    case = CASES[name]
    assert check_case(case, tmp_path) == case.paths
