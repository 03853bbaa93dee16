"""``torch.tensor_split`` at split points read off the data (``[int(h.argmax())]``): the parts are
``Slice`` s at the points the host passes in (``dycl.backends.onnx_tensor_split``), not torch's
translation that took the list for a number of sections and gave ONNX Runtime an invalid ``Tile``;
points at either end (an empty part), negative points and several points; in process, through the
torch-free host. A number of sections read off the data is refused at the user's line."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import dycl
from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host

pytestmark = pytest.mark.filterwarnings("ignore")
ATOL = 1e-5


class PeakSplit(nn.Module):
    """Features left and right of the strongest one, pooled; the heavier side is rescaled."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 8)

    def forward(self, x):
        h = torch.relu(self.proj(x))
        left, right = torch.tensor_split(h, [int(h.argmax())], dim=1)
        if left.sum() > right.sum():
            return torch.cat([left.sum(1, keepdim=True) * 0.5, right.sum(1, keepdim=True)], dim=1)
        return torch.cat([left.sum(1, keepdim=True), right.mean(1, keepdim=True).nan_to_num()], dim=1)


class Window(nn.Module):
    """Three parts around a point counted from the end, as a tokenizer's window is cut."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 10)

    def forward(self, x):
        h = self.proj(x)
        start = int((h > 0).sum()) // 2 + 1
        before, inside, after = torch.tensor_split(h, [-(start + 2), -start], dim=-1)
        if h.mean() > 0:
            return before.sum(-1) + after.sum(-1), inside.sum(-1)
        return before.sum(-1) - after.sum(-1), inside.sum(-1) * 2


class Sections(nn.Module):
    def forward(self, x):
        parts = torch.tensor_split(x, int((x > 0).sum()) % 2 + 2, dim=1)
        return parts[0].sum() - parts[-1].sum()


def _inputs(count: int = 24) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(11)
    return [torch.randn(1, 4, generator=generator) * (1 + i % 4) + (i % 3 - 1) for i in range(count)]


def _points(model: nn.Module, inputs: list[torch.Tensor]) -> set[int]:
    with torch.no_grad():
        return {int(torch.relu(model.proj(x)).argmax()) for x in inputs}


@pytest.mark.parametrize("cls", [PeakSplit, Window])
def test_split_points_from_data_agree_in_process_and_as_host(cls, tmp_path):
    torch.manual_seed(5)
    model, inputs = cls().eval(), _inputs()
    assert assert_agrees_in_process_and_as_host(model, inputs, tmp_path, ATOL, min_paths=2) >= 2


def test_split_points_from_data_reach_both_ends():
    torch.manual_seed(5)
    model, inputs = PeakSplit().eval(), _inputs()
    points = _points(model, inputs)
    assert len(points) >= 4 and 0 in points  # an empty left part among them


def test_a_number_of_sections_from_data_is_refused_at_the_users_line():
    with pytest.raises(dycl.UnsupportedError, match="number of sections computed from data") as refused:
        dycl.compile(Sections().eval(), _inputs()[0], progress=False)
    assert "test_data_split_points.py" in str(refused.value)
