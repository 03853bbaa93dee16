"""Issue 27: a Python int computed from the symbolic batch inside code exported as one
graph stays symbolic where the graph serves every batch size: ``len(x)`` inside a
submodule's forward (the DyCL authors' SDN blocks: ``torch.zeros([len(x), classes])``)
and a start-token batch built by list repetition (``torch.LongTensor([[start]] * n)``).
Each model compiles on a batch-1 example without a ``SpecialisationWarning`` and agrees
with eager at batch 1, 2 and 5, in process and through the torch-free host."""

from __future__ import annotations

import warnings

import torch
from torch import nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch

BATCHES = (1, 2, 5)


class Block(nn.Module):
    """A conv block; without an exit head it hands back an empty score buffer of its own."""

    def __init__(self, cin: int, cout: int, classes: int, head: bool) -> None:
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU())
        self.classes = classes
        self.head = nn.Linear(cout, classes) if head else None
        if not head:
            self.forward = self.no_exit

    def forward(self, x):
        out = self.conv(x)
        return out, torch.tensor(1), self.head(out.mean((2, 3)))

    def no_exit(self, x):
        return self.conv(x), torch.tensor(0), torch.zeros([len(x), self.classes])


class NewZerosBlock(nn.Module):
    def __init__(self, width: int, classes: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.classes = classes

    def forward(self, h):
        scores = h.new_zeros(h.size(0), self.classes)
        scores[:, 0] = h.sum(1)
        return torch.relu(self.fc(h)), scores


class EarlyExitNet(nn.Module):
    """Stops at the first head whose mean confidence passes the threshold."""

    def __init__(self, threshold: float = 0.3) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(3, 8, 4, False), Block(8, 8, 4, True), Block(8, 8, 4, False),
                                     Block(8, 8, 4, True)])
        self.tail = NewZerosBlock(8, 4)
        self.last = nn.Linear(8, 4)
        self.threshold = threshold

    def forward(self, x):
        for block in self.blocks:
            x, has_exit, scores = block(x)
            if has_exit:  # noqa: SIM102 - nested as people write it
                if scores.softmax(1).max(1).values.mean() > self.threshold:
                    return scores
        h, extra = self.tail(x.mean((2, 3)))
        return self.last(h) + extra


def _inputs(shape: tuple[int, ...]) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    return [torch.randn(batch, *shape, generator=generator) * scale for batch in BATCHES for scale in (0.1, 1, 4, 9)]


def _compile_without_specialising(model: nn.Module, example: torch.Tensor) -> dycl.CompiledModel:
    with warnings.catch_warnings():
        warnings.simplefilter("error", dycl.SpecialisationWarning)
        return dycl.compile(model, example)


def test_len_of_the_batch_inside_a_submodule_stays_symbolic(tmp_path):
    torch.manual_seed(0)
    model = EarlyExitNet().eval()
    compiled = _compile_without_specialising(model, torch.randn(1, 3, 8, 8))
    inputs = _inputs((3, 8, 8))
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) >= 2
    assert {x.shape[0] for x in inputs} == set(BATCHES)
    report = run_host_without_torch(compiled.save(tmp_path / "exits"), model, inputs, atol=1e-5)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}
