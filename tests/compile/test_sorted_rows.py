"""``sorted`` over the rows of an input along a static dim with a key read off the data
(``sorted(slots.unbind(1), key=lambda s: float(self.score(s).mean()), reverse=True)``), the way slot and
proposal models order their items before decoding them: each row's key is computed once on the
host, the positions are sorted there as Python sorts them (ties keep their order, ``reverse=``
too), and the rows are taken in that order (``rewriter.choices``). Against eager in process and as
a torch-free host on inputs that give several orders (counted, asserted)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host

pytestmark = pytest.mark.filterwarnings("ignore")


class SlotsByScore(nn.Module):
    """Slots ``(batch, slots, dim)`` ordered by a learned score, best first, then decoded together."""

    def __init__(self, slots: int = 4, dim: int = 3) -> None:
        super().__init__()
        self.score = nn.Linear(dim, 1)
        self.decoder = nn.Linear(slots * dim, 2)

    def order(self, x):
        return tuple(sorted(range(x.shape[1]), key=lambda i: float(self.score(x[:, i]).mean()), reverse=True))

    def forward(self, slots):
        ordered = sorted(slots.unbind(1), key=lambda s: float(self.score(s).mean()), reverse=True)
        return self.decoder(torch.cat(ordered, dim=-1))


def peak_position(row):
    return int(row.argmax())


class RowsByPeak(nn.Module):
    """The first sample's rows by where their peak is (many ties: the sort must keep their order)."""

    def order(self, x):
        return tuple(sorted(range(x.shape[1]), key=lambda i: peak_position(x[0][i])))

    def forward(self, x):
        rows = sorted(x[0], key=peak_position)
        return torch.stack(rows) * torch.arange(1.0, len(rows) + 1).unsqueeze(1)


def _inputs(shape: tuple[int, ...], count: int, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator) for _ in range(count)]


@pytest.mark.parametrize("make, shape", [(SlotsByScore, (2, 4, 3)), (RowsByPeak, (1, 5, 3))],
                         ids=["lambda key, reverse", "def key with ties"])
def test_rows_sorted_by_a_key_from_data_agree_with_eager(make, shape, tmp_path):
    torch.manual_seed(2)
    model = make().eval()
    inputs = _inputs(shape, 30, seed=5)
    with torch.no_grad():
        orders = {model.order(x) for x in inputs}
    assert len(orders) >= 6  # (one line sorts: eager's line trace sees one path)
    assert_agrees_in_process_and_as_host(model, inputs, tmp_path, 1e-5)
