"""The manifest's output table comes from the explore walk (``dycl.artifact.outputs``): the
example's own path is followed through every condition, so a model whose output shape
depends on the path (greedy decoding that stops at an end token) is described with the
example's shape, whichever path the example takes, and the artifact gives what eager gives."""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch import nn

import dycl
from dycl.harness.testing import assert_equivalent


class GreedyDecoder(nn.Module):
    """Greedy decoding as tutorials write it: stop at the end token, return the words and the state."""

    def __init__(self, vocab: int = 5, hidden: int = 8, max_steps: int = 5) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.cell = nn.GRUCell(hidden, hidden)
        self.out = nn.Linear(hidden, vocab)
        self.max_steps = max_steps
        self.eos = 0

    def forward(self, h):
        token = torch.ones(h.shape[0], dtype=torch.long)
        words = []
        for _ in range(self.max_steps):
            h = self.cell(self.embed(token), h)
            token = self.out(h).argmax(-1)
            words.append(token)
            if token.item() == self.eos:
                break
        return torch.stack(words, dim=1), h


def _examples(model: nn.Module, count: int) -> dict[int, torch.Tensor]:
    """One input per output length, for ``count`` lengths."""
    found: dict[int, torch.Tensor] = {}
    generator = torch.Generator().manual_seed(11)
    with torch.no_grad():
        while len(found) < count:
            h = torch.randn(1, 8, generator=generator) * 3
            found.setdefault(model(h)[0].shape[1], h)
    return found


def test_output_shapes_are_those_of_the_examples_own_path(tmp_path):
    torch.manual_seed(2)
    model = GreedyDecoder().eval()
    examples = _examples(model, 2)
    inputs = list(examples.values()) * 3
    for length, example in examples.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dycl.SpecialisationWarning)  # .item(): the batch is static at 1
            compiled = dycl.compile(model, example)
        words, state = compiled.manifest["outputs"]
        assert words == {"name": "output_0", "kind": "tensor", "dtype": "int64", "example_shape": [1, length]}
        assert state == {"name": "output_1", "kind": "tensor", "dtype": "float32", "example_shape": [1, 8]}
        assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-6) == 2
        loaded = dycl.load(compiled.save(tmp_path / f"decoder{length}"))
        assert assert_equivalent(model, loaded, inputs, min_paths=2, atol=1e-6) == 2
        arrays = loaded.run_numpy(example.numpy())
        assert np.shape(arrays[0]) == (1, length)
    assert len(examples) == 2
