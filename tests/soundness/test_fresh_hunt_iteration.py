"""Fresh hunt, family 3: Python iteration over tensors (``for row in x``, ``zip(x, y)``,
``enumerate(x.unbind(0))``, ``split``/``chunk`` with sizes from data, ``max(..., key=...)``
and ``sorted`` over unbound rows)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from tests.soundness.fresh_hunt import Case, at, check_case, seeded


def _randn(seed, shape, spread=4):
    def make():
        g = seeded(seed)
        return [torch.randn(*shape, generator=g) * (0.3 + i % spread) for i in range(50)]
    return make


class PerRowPolicy(nn.Module):  # "for row in x" with a per-row decision
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):  # x: (3, 4)
        outs = []
        for row in x:
            if row.sum() > 0:
                outs.append(self.fc(row))
            else:
                outs.append(row * 0.5)
        return torch.stack(outs)


class ZipPairs(nn.Module):  # pairwise comparison of two batches, row by row
    def forward(self, x, y):
        acc = torch.zeros_like(x[0])
        for a, b in zip(x, y):
            if a.max() > b.max():  # a statement, not `a if ... else b`: eager's paths are counted by line
                acc = acc + a
            else:
                acc = acc + b
        return acc


def _pair_inputs():
    g = seeded(301)
    return [(torch.randn(3, 4, generator=g), torch.randn(3, 4, generator=g) * (1 + i % 3)) for i in range(50)]


class EnumerateUnbind(nn.Module):  # positional weighting with a skip on small rows
    def forward(self, x):  # x: (4, 3)
        total = x.new_zeros(x.shape[1])
        for i, row in enumerate(x.unbind(0)):
            if row.abs().mean() < 0.5:
                continue
            total = total + (i + 1) * row
        return total


class SplitByLengths(nn.Module):  # packed sequences: split a flat tensor by per-item lengths
    def forward(self, flat, lengths):
        pieces = flat.split(lengths.tolist())
        means = torch.stack([p.mean() for p in pieces])
        if means.max() > 0.5:
            means = means * 2
        return means


def _split_inputs():
    g = seeded(302)
    out = []
    for i in range(50):
        lengths = torch.tensor([(1, 2, 3), (3, 2, 1), (2, 2, 2), (1, 1, 4), (4, 1, 1)][i % 5])
        out.append((torch.randn(int(lengths.sum()), generator=g), lengths))
    return out


class ChunkByData(nn.Module):  # number of chunks decided from the data
    def forward(self, x):  # x: (6, 2)
        n = 3 if x.abs().mean() > 1 else 2
        parts = x.chunk(n, dim=0)
        return torch.stack([p.sum(0) for p in parts]).max(0).values


class MaxByNorm(nn.Module):  # pick the strongest row with Python's max(key=...)
    def forward(self, x):  # x: (4, 3)
        best = max(x.unbind(0), key=lambda r: r.norm())
        return best * 2


class SortedRows(nn.Module):  # Python sorted() over rows, keyed by a host number
    def forward(self, x):  # x: (3, 2)
        rows = sorted(x.unbind(0), key=lambda r: r.sum().item())
        return torch.cat(rows)


class RunningMaxLoop(nn.Module):  # cumulative max written as a loop over time steps
    def forward(self, x):  # x: (5, 2)
        best = x[0]
        outs = [best]
        for step in x[1:]:
            if step.sum() > best.sum():
                best = step
            outs.append(best)
        return torch.stack(outs)


class CountPositives(nn.Module):  # a Python counter over rows, returned with the tensor
    def forward(self, x):  # x: (4, 2)
        count = 0
        for row in x:
            if (row > 0).all():
                count += 1
        return x * count, count


CASES = {
    # the loops below unroll to the example's rows under dynamic=False (rewriter.tensor_rows)
    "per_row_policy": Case(PerRowPolicy, _randn(303, (3, 4)), 8, dynamic=False),
    "zip_pairs": Case(ZipPairs, _pair_inputs, 8, dynamic=False),
    "enumerate_unbind": Case(EnumerateUnbind, _randn(304, (4, 3)), 6, dynamic=False),
    "split_by_lengths": Case(SplitByLengths, _split_inputs, 2),
    "chunk_by_data": Case(ChunkByData, _randn(305, (6, 2)), 2),
    "max_by_norm": Case(MaxByNorm, _randn(306, (4, 3)), 2,
        refused=at("lambda", 'best = max(x.unbind(0), key=lambda r: r.norm())')),
    "sorted_rows": Case(SortedRows, _randn(307, (3, 2)), 2,
        refused=at("lambda", 'rows = sorted(x.unbind(0), key=lambda r: r.sum().item())')),
    "running_max_loop": Case(RunningMaxLoop, _randn(308, (5, 2)), 13, dynamic=False),
    "count_positives": Case(CountPositives, _randn(309, (4, 2)), 12, dynamic=False),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_iteration_over_tensors(name, tmp_path):
    case = CASES[name]
    assert check_case(case, tmp_path) == case.paths
