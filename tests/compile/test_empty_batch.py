"""An empty default batch is refused by name, never answered with graphs traced at sizes >= 1.

A greedy decoder that starts from ``torch.full((feats.size(0), 1), start)`` and stops when
every row emitted the end token: eagerly, an empty batch stops at once (``all()`` of nothing
is true) and returns shape ``(0, 2)``; the compiled graphs, traced at sizes of at least 1,
would give another shape. Found by s27batch: before, the host accepted batch 0 and answered
``(0, 13)``. Now the host refuses it, in process and as the saved artifact, and every
non-empty batch agrees with eager over several paths.
"""

from __future__ import annotations

import pytest
import torch
from dycl.hostgen import host_runtime
from torch import nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.model.dynamic import BATCH


class GreedyDecoder(nn.Module):
    def __init__(self, vocab: int = 7, hidden: int = 12, start: int = 1, end: int = 2, steps: int = 6) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.cell = nn.GRUCell(hidden, hidden)
        self.head = nn.Linear(hidden, vocab)
        self.start, self.end, self.steps = start, end, steps

    def forward(self, feats):
        tokens = torch.full((feats.size(0), 1), self.start, dtype=torch.long)
        h = feats
        for _ in range(self.steps):
            h = self.cell(self.embed(tokens[:, -1]), h)
            nxt = self.head(h).argmax(-1, keepdim=True)
            tokens = torch.cat([tokens, nxt], dim=1)
            if (nxt == self.end).all():
                break
        return tokens


def _inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(5)
    return [torch.randn(batch, 12, generator=generator) * 3 for batch in (1, 1, 2, 3, 1, 2) * 4]


@pytest.fixture(scope="module")
def compiled():
    torch.manual_seed(0)
    model = GreedyDecoder().eval()
    with torch.no_grad():
        model.head.bias[2] += 1.5  # the end token wins often, not always: several loop lengths
    return model, dycl.compile(model, torch.randn(1, 12))


def test_non_empty_batches_agree_over_several_paths(compiled, tmp_path):
    model, program = compiled
    assert assert_equivalent(model, program, _inputs(), min_paths=2) >= 2
    program.save(tmp_path / "artifact")
    assert assert_equivalent(model, dycl.load(tmp_path / "artifact"), _inputs(), min_paths=2) >= 2


def test_an_empty_batch_is_refused_by_name(compiled, tmp_path):
    model, program = compiled
    empty = torch.randn(0, 12)
    assert tuple(model(empty).shape) == (0, 2)  # eager stops at once
    with pytest.raises(ValueError, match=r"dimension 0 \('batch'\) is 0"):
        program(empty)
    program.save(tmp_path / "artifact")
    with pytest.raises(ValueError, match=r"dimension 0 \('batch'\) is 0"):
        dycl.load(tmp_path / "artifact")(empty)


def test_the_host_refuses_the_batch_dycl_names_by_default():
    assert host_runtime.DEFAULT_BATCH == BATCH
