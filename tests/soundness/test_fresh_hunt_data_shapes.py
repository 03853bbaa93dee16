"""Fresh hunt, family 2: shapes that come from data (boolean indexing, ``nonzero``,
``masked_select``, ``unique``, ``topk`` with k from data, boolean-mask assignment)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from tests.soundness.fresh_hunt import Case, at, check_case, seeded


class PositiveMean(nn.Module):
    def forward(self, x):
        pos = x[x > 0]
        if pos.numel() == 0:
            return x.new_zeros(())
        return pos.mean()


def _positive_inputs():
    g = seeded(11)
    return [torch.randn(3, 4, generator=g) - (3.0 if i % 4 == 0 else 0.0) for i in range(52)]


class NonzeroGather(nn.Module):
    def forward(self, x):
        idx = torch.nonzero(x > 0.5)
        picked = x[idx[:, 0], idx[:, 1]]
        if idx.shape[0] > 3:
            return picked.sum() / idx.shape[0]
        return picked.sum()


def _nonzero_inputs():
    g = seeded(12)
    return [torch.randn(2 + i % 2, 3, generator=g) for i in range(52)]


class MaskedSelectTopk(nn.Module):
    def forward(self, x):
        v = torch.masked_select(x, x.abs() > 1.0)
        k = min(3, v.numel())
        if k == 0:
            return x.sum().unsqueeze(0)
        return torch.topk(v, k).values


def _masked_inputs():
    g = seeded(13)
    return [torch.randn(2, 4, generator=g) * (0.3 if i % 5 == 0 else 1.2) for i in range(50)]


class ClassCentroids(nn.Module):  # prototype-network style: one mean per label present
    def forward(self, x, y):
        labels = torch.unique(y)
        centroids = [x[y == label].mean(0) for label in labels]
        return torch.stack(centroids), labels


def _centroid_inputs():
    g = seeded(14)
    out = []
    for i in range(50):
        n = 6 + i % 3
        out.append((torch.randn(n, 3, generator=g), torch.randint(0, 2 + i % 3, (n,), generator=g)))
    return out


class TopkFromData(nn.Module):
    def forward(self, x):  # keep as many of the largest as there are positives
        k = int((x > 0).sum())
        k = max(k, 1)
        values, indices = x.topk(k)
        if k > 3:
            return values * 2, indices
        return values, indices


def _topk_inputs():
    g = seeded(15)
    return [torch.randn(6, generator=g) for _ in range(50)]


class ClampNegatives(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        h[h < 0] = 0
        if (h == 0).sum() > h.numel() // 2:
            return h - 1
        return h * 2


def _clamp_inputs():
    g = seeded(16)
    return [torch.randn(1 + i % 3, 4, generator=g) for i in range(50)]


class FromFirstPositive(nn.Module):
    def forward(self, x):  # x: (L,)
        idx = (x > 0).nonzero()
        if len(idx) > 0:
            first = idx[0].item()
            return x[first:].cumsum(0)
        return x


def _first_positive_inputs():
    g = seeded(17)
    return [torch.randn(6, generator=g) - (4.0 if i % 5 == 1 else 0.0) for i in range(50)]


CASES = {
    "positive_mean": Case(PositiveMean, _positive_inputs, 2),
    "nonzero_gather": Case(NonzeroGather, _nonzero_inputs, 2),
    "masked_select_topk": Case(MaskedSelectTopk, _masked_inputs, 2),
    "class_centroids": Case(ClassCentroids, _centroid_inputs, 3,
                            refused=at("data-dependent", "centroids = [x[y == label]")),
    "topk_from_data": Case(TopkFromData, _topk_inputs, 2),  # k from data: a symbol (hcfg.symbolic)
    "clamp_negatives": Case(ClampNegatives, _clamp_inputs, 2),
    "from_first_positive": Case(FromFirstPositive, _first_positive_inputs, 2),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_data_dependent_shape(name, tmp_path):
    case = CASES[name]
    assert check_case(case, tmp_path) == case.paths
