"""Loops over the rows of a computed tensor along a static dim (``rewriter.tensor_rows``): a
projection split into heads by ``view(b, heads, -1)``, a per-timestep loop over an embedding's
static length by ``permute``, a ``zip`` of two projections' columns, a gate over the first channels
of a slice. Each against eager in process and as a torch-free host on inputs of several batch
sizes that take several paths (counted, asserted). A dim that folds the batch in (``view(-1, 4)``)
or that data sizes (a boolean mask) stays refused with the message of a value unknown at compile time."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import dycl
from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host


class HeadGate(nn.Module):
    """Projects to four heads and keeps a head only where its mean is positive."""

    def __init__(self, features: int = 6, heads: int = 4, head_dim: int = 3) -> None:
        super().__init__()
        self.heads = heads
        self.proj = nn.Linear(features, heads * head_dim)
        self.act = nn.GELU()

    def forward(self, x):
        batch = x.size(0)
        h = self.act(self.proj(x)).view(batch, self.heads, -1)
        outs = []
        for i, head in enumerate(h.unbind(1)):
            if head.mean() > 0:
                outs.append(head * (i + 1))
            else:
                outs.append(torch.zeros_like(head))
        return torch.cat(outs, dim=-1)


class StepwiseCell(nn.Module):
    """An embedding stepped over its static sequence length, stopping once the state saturates."""

    def __init__(self, features: int = 4, hidden: int = 5) -> None:
        super().__init__()
        self.embed = nn.Linear(features, hidden)
        self.rec = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x):
        feats = self.embed(x)
        state = torch.zeros_like(feats[:, 0])
        for step in feats.permute(1, 0, 2):
            state = torch.tanh(step + self.rec(state))
            if state.abs().mean() > 0.55:
                break
        return state


class PairedProjections(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.query = nn.Linear(4, 3)
        self.key = nn.Linear(4, 3)

    def forward(self, x):
        acc = torch.zeros_like(x[:, 0])
        for q, k in zip(torch.relu(self.query(x)).unbind(1), self.key(x).unbind(1)):
            if (q * k).sum() > 0:
                acc = acc + q * k
            else:
                acc = acc - k
        return acc


class FirstChannels(nn.Module):
    def forward(self, x):
        kept = []
        for c in x[:, :3].float().unbind(1):
            if c.sum() > 0:
                kept.append(c)
            else:
                kept.append(-c)
        return torch.stack(kept, 1)


def _batch_sizes(shape: tuple[int, ...], count: int, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(1 + i % 3, *shape[1:], generator=generator) * (0.5 + i % 3) + (i % 5 - 2) * 0.3
            for i in range(count)]


@pytest.mark.parametrize("make, shape, min_paths", [
    (HeadGate, (2, 6), 4),
    (StepwiseCell, (2, 5, 4), 3),
    (PairedProjections, (2, 4), 4),
    (FirstChannels, (2, 5, 2), 4),
])
def test_a_loop_over_a_computed_tensors_static_dim_agrees_with_eager(make, shape, min_paths, tmp_path):
    torch.manual_seed(0)
    paths = assert_agrees_in_process_and_as_host(make().eval(), _batch_sizes(shape, 30, 1), tmp_path, atol=1e-5,
                                                 min_paths=min_paths)
    assert paths >= min_paths, paths


class BatchFoldedIn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(6, 8)

    def forward(self, x):
        total = torch.zeros(4)
        for row in self.proj(x).view(-1, 4):  # batch * 2 rows: as many as the batch says
            total = total + row
        return total


class DataSized(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(6, 4)

    def forward(self, x):
        total = torch.zeros(4)
        for row in self.proj(x)[x[:, 0] > 0]:  # as many rows as the data selects
            total = total + row
        return total


@pytest.mark.parametrize("make", [BatchFoldedIn, DataSized])
def test_a_loop_over_a_dim_the_batch_or_the_data_sizes_stays_refused(make):
    with pytest.raises(dycl.UnsupportedError, match="a for loop over a value that is not known at compile time"):
        dycl.compile(make().eval(), torch.randn(3, 6))
