"""A number the host reads off a tensor (``int(t)``, ``t.item()``) and the next sub-DNN uses as a
size (``torch.topk(x, k)``, ``x[:n]``) is a symbol of its own (``hcfg.symbolic.lift_data_numbers``),
never the example's number compiled in: in process and through the torch-free host, on inputs
whose number differs from the example's."""

from __future__ import annotations

import torch
import torch.nn as nn

from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host


class PositiveScores(nn.Module):
    """Keeps the scores above zero, largest first; a long list is rescaled."""

    def forward(self, scores):
        k = int((scores > 0).sum())
        top = torch.topk(scores.flatten(), k).values
        if top.numel() > 4:
            return top / top.sum()
        return top


class ValidPrefix(nn.Module):
    """Rows are sorted by validity; ``count`` of them are valid (as a data loader packs them)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 3)

    def forward(self, rows):
        count = (rows[:, 0] > 0).sum().item()
        valid = self.proj(rows[:count])
        if count > 2:
            return valid.relu()
        return valid * 2


def _inputs(rows: int, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(rows, 4, generator=generator) + shift for shift in (0.0, -1.0, 1.0, -3.0) for _ in range(5)]


def test_a_number_read_off_a_tensor_stays_a_size(tmp_path):
    model = PositiveScores().eval()
    inputs = _inputs(2, 0)
    assert len({int((x > 0).sum()) for x in inputs}) >= 4  # many sizes, not only the example's
    assert assert_agrees_in_process_and_as_host(model, inputs, tmp_path, 1e-5) == 2


def test_a_prefix_of_data_dependent_length(tmp_path):
    model = ValidPrefix().eval()
    inputs = [x[x[:, 0].argsort(descending=True)] for x in _inputs(6, 1)]
    assert len({int((x[:, 0] > 0).sum()) for x in inputs}) >= 4
    assert assert_agrees_in_process_and_as_host(model, inputs, tmp_path, 1e-5) == 2
