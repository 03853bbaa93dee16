"""Issue 27: a Python number made from a symbolic size inside code exported as one
graph where dycl cannot keep it symbolic (a start-token batch built by numpy:
``torch.from_numpy(np.array([[start]] * batch_size))``; the DyCL authors'
``torch.LongTensor([[start]] * batch_size)`` stays symbolic: ``test_symbolic_batch_numbers.py``)
specialises that graph to the example's sizes with a ``SpecialisationWarning`` — the
host refuses other sizes by name — instead of failing the compile; a number made from
tensor data is still refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch


class GreedyCaptioner(nn.Module):
    """An image-feature encoder and a GRU decoder that stops when every caption has ended."""

    def __init__(self, vocab: int = 12, width: int = 8, start: int = 1, end: int = 2, steps: int = 4) -> None:
        super().__init__()
        self.encoder = nn.Linear(6, width)
        self.embed = nn.Embedding(vocab, width)
        self.cell = nn.GRUCell(width, width)
        self.head = nn.Linear(width, vocab)
        self.start, self.end, self.steps = start, end, steps

    def forward(self, features):
        batch_size = features.size(0)
        hidden = torch.tanh(self.encoder(features))
        words = torch.from_numpy(np.array([[self.start]] * batch_size))
        tokens = []
        for _ in range(self.steps):
            hidden = self.cell(self.embed(words[:, -1]), hidden)
            word = self.head(hidden).argmax(-1)
            tokens.append(word)
            words = torch.cat([words, word[:, None]], 1)
            if (word == self.end).all():
                break
        return torch.stack(tokens, 1)


class CountedStart(GreedyCaptioner):
    def forward(self, features):
        count = int((features > 0).sum())  # a number from data, not from a size
        return torch.LongTensor([[self.start]] * count)


def _captioner() -> GreedyCaptioner:
    torch.manual_seed(0)
    model = GreedyCaptioner().eval()
    with torch.no_grad():  # make "end" likely, so that captions stop after different numbers of steps
        model.head.bias[model.end] += 0.8
    return model


def test_a_number_from_the_symbolic_batch_specialises_the_graph_with_a_warning(tmp_path):
    model = _captioner()
    with pytest.warns(dycl.SpecialisationWarning, match=r"test_size_specialisation\.py:\d+.*batch == 2.*dynamic=False"):
        compiled = dycl.compile(model, torch.randn(2, 6))
    generator = torch.Generator().manual_seed(1)
    inputs = [torch.randn(batch, 6, generator=generator) * scale for batch in (2, 1) for scale in (0.2, 1, 3, -2)]
    assert assert_equivalent(model, compiled, inputs, min_paths=2) >= 2
    with pytest.raises(ValueError, match=r"\(batch == 2\).*got batch = 3"):
        compiled(torch.randn(3, 6))
    report = run_host_without_torch(compiled.save(tmp_path / "captioner"), model, inputs, atol=0.0)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


def test_a_number_from_tensor_data_is_still_refused_at_its_line():
    with pytest.raises(dycl.UnsupportedError, match=r"test_size_specialisation\.py:\d+"):
        dycl.compile(CountedStart().eval(), torch.randn(2, 6))


class PositiveCount(nn.Module):
    """No control flow of its own: exported as part of its caller's graph."""

    def forward(self, x):
        positives = x[x > 0].size(0)  # a size, but of a tensor whose size comes from data
        return x * len([1] * positives)


class ScaledByPositives(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.count = PositiveCount()

    def forward(self, x):
        y = self.count(x)
        if y.sum() > 0:
            return y
        return -y


def test_a_number_from_a_size_that_data_decides_is_still_refused():
    with pytest.raises(dycl.UnsupportedError, match=r"test_size_specialisation\.py:\d+"):
        dycl.compile(ScaledByPositives().eval(), torch.randn(2, 6))
