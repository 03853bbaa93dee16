"""``diagonal`` takes the diagonal elements themselves (``dycl.backends.onnx_symbolics``):
``inf``/``NaN`` elsewhere in a row leave it as it is (torch's translation multiplied by an
identity mask, so ``inf * 0`` made it NaN) and an integer input stays integer; offsets
above and below, ``dim1``/``dim2`` other than the last two, in process and through the
torch-free host."""

from __future__ import annotations

import torch
import torch.nn as nn

from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host


class ContrastiveScores(nn.Module):
    """Query/key similarities with padded keys masked by ``-inf``; the positives are the
    diagonal; where each row's best is, as integers, its diagonal the hits."""

    def forward(self, queries, keys, valid):  # queries, keys: (N, D); valid: (N,) bool
        scores = (queries @ keys.T).masked_fill(~valid.unsqueeze(0), float("-inf"))
        positives = scores.diagonal()
        hits = (scores[:3, :3] == scores[:3, :3].amax(-1, keepdim=True)).long()
        above = torch.diagonal(scores.unsqueeze(0).expand(2, -1, -1), 1, 1, 2)
        below = scores.T.diagonal(-1)
        if hits.diagonal().sum() >= 2:
            return positives, hits.diagonal(), above, below
        return positives * 2, hits.diagonal() * 10, above, below


def _inputs() -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(80)
    out = []
    for i in range(50):
        keys = torch.randn(4, 5, generator=generator)
        queries = keys * (i % 3) + torch.randn(4, 5, generator=generator)
        valid = torch.tensor([True, True, i % 2 == 0, i % 5 != 0])
        out.append((queries, keys, valid))
    return out


def test_diagonal_is_the_elements_themselves(tmp_path):
    model = ContrastiveScores().eval()
    inputs = _inputs()
    assert assert_agrees_in_process_and_as_host(model, inputs, tmp_path, 1e-5) == 2
