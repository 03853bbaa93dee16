"""``squeeze()`` without a dim in a model compiled with a symbolic batch (``dycl.backends.onnx_squeeze``):
the graph squeezes the example's axes on every call, and a batch of 1 — where eager drops the batch
dim too and returns another rank — is refused by name (``ShapeGuardError``), never run into an ONNX
Runtime rank error or answered with the wrong rank; other batches agree with eager in process and
through the torch-free host."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import dycl
from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host


class ScalarScore(nn.Module):
    """A regression head whose (N, 1) output is squeezed to (N,), as people write it."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(5, 8), nn.ReLU())
        self.score = nn.Linear(8, 1)

    def forward(self, x):
        score = self.score(self.body(x)).squeeze()
        if score.mean() > 0.5:
            return torch.sigmoid(score)
        return score * 0.5


def _inputs(batch: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(batch)
    return [torch.randn(batch, 5, generator=generator) * 2 + shift for shift in (-3.0, 3.0) for _ in range(5)]


def test_squeeze_keeps_the_compiled_rank_and_refuses_a_batch_of_one(tmp_path):
    model = ScalarScore().eval()
    inputs = _inputs(3) + _inputs(7)
    assert assert_agrees_in_process_and_as_host(model, inputs, tmp_path, 1e-5) == 2
    compiled = dycl.compile(model, inputs[0])
    assert model(torch.randn(1, 5)).dim() == 0  # eager: another rank at a batch of 1
    with pytest.raises(ValueError, match=r"batch != 1"):
        compiled(torch.randn(1, 5))
    loaded = dycl.load(compiled.save(tmp_path / "again"))
    with pytest.raises(ValueError, match=r"batch != 1"):
        loaded(torch.randn(1, 5).numpy())
