"""Fresh hunt, family 4: loops that stop on tensors (``while err > tol``, ``break`` and
``continue`` on tensor tests, early ``return`` in nested loops, loop-carried lists,
``enumerate(zip(...))`` over ModuleLists with a data-dependent exit, greedy decoding)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.soundness.fresh_hunt import Case, at, check_case, seeded


class NewtonSqrt(nn.Module):
    def __init__(self, tol=1e-4):
        super().__init__()
        self.tol = tol

    def forward(self, x):  # x > 0
        y = x.clone()
        while (y * y - x).abs().max() > self.tol:
            y = 0.5 * (y + x / y)
        return y


def _newton_inputs():
    g = seeded(31)
    return [torch.rand(3, generator=g) * (1 + i % 6) * 4 + 0.5 if i % 9 else torch.ones(3) for i in range(50)]


class NestedEarlyReturn(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

    def forward(self, x):
        h = x
        for i, block in enumerate(self.blocks):
            for _ in range(2):
                h = h + torch.tanh(block(h))
                if h.norm() > 6:
                    return h, i
        return h, -1


def _nested_inputs():
    g = seeded(32)
    return [torch.randn(1, 4, generator=g) * (0.5 + i % 5) for i in range(50)]


class SkipAndStop(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(5, 5) for _ in range(4))

    def forward(self, x):
        h = x
        for layer in self.layers:
            out = layer(h)
            if out.mean() < 0:
                continue
            h = out
            if h.abs().max() > 2.0:
                break
        return h


def _skip_inputs():
    g = seeded(33)
    return [torch.randn(2, 5, generator=g) * (1 + i % 3) for i in range(50)]


class CollectUntilFlat(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(4))

    def forward(self, x):
        outs = []
        h = x
        for layer in self.layers:
            h = torch.sigmoid(layer(h))
            outs.append(h)
            if h.std() < 0.2:
                break
        return torch.stack(outs)


def _collect_inputs():
    g = seeded(34)
    return [torch.randn(1, 4, generator=g) * (0.1 + i % 4) for i in range(50)]


class ConfidentExit(nn.Module):  # BranchyNet / early-exit style
    def __init__(self, threshold=0.6):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(6, 6), nn.ReLU()) for _ in range(3))
        self.heads = nn.ModuleList(nn.Linear(6, 3) for _ in range(3))
        self.threshold = threshold

    def forward(self, x):
        h = x
        for i, (block, head) in enumerate(zip(self.blocks, self.heads)):
            h = block(h)
            logits = head(h)
            if F.softmax(logits, dim=-1).max() > self.threshold:
                return logits, i
        return logits, len(self.blocks) - 1


def _exit_inputs():
    g = seeded(35)
    return [torch.randn(1, 6, generator=g) * (0.2 + i % 6) for i in range(50)]


class CountedRelaxation(nn.Module):
    def forward(self, x):
        it = 0
        while it < 10:
            x = x * 0.5 + 1
            it += 1
            if (x - 2).abs().max() < 0.05:
                break
        return x, it


def _relax_inputs():
    g = seeded(36)
    return [torch.randn(3, generator=g) * (1 + i % 8) for i in range(50)]


class GreedyDecoder(nn.Module):
    def __init__(self, vocab=6, eos=0, max_len=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, 8)
        self.cell = nn.GRUCell(8, 8)
        self.out = nn.Linear(8, vocab)
        self.eos, self.max_len = eos, max_len

    def forward(self, h):  # h: (1, 8)
        tokens = []
        tok = torch.tensor([1])
        while len(tokens) < self.max_len:
            h = self.cell(self.emb(tok), h)
            tok = self.out(h).argmax(-1)
            tokens.append(tok.item())
            if tokens[-1] == self.eos:
                break
        return torch.tensor(tokens)


def _decoder_inputs():
    g = seeded(37)
    return [torch.randn(1, 8, generator=g) * (1 + i % 4) for i in range(50)]


CASES = {
    "newton_sqrt": Case(NewtonSqrt, _newton_inputs, 2, refused=at("while loop whose", "while (y * y - x)")),
    "nested_early_return": Case(NestedEarlyReturn, _nested_inputs, 6),
    "skip_and_stop": Case(SkipAndStop, _skip_inputs, 11),
    "collect_until_flat": Case(CollectUntilFlat, _collect_inputs, 2),
    "confident_exit": Case(ConfidentExit, _exit_inputs, 2),
    "counted_relaxation": Case(CountedRelaxation, _relax_inputs, 4),
    "greedy_decoder": Case(GreedyDecoder, _decoder_inputs, 2,
                           refused=at("different structure", "return torch.tensor(tokens)")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_tensor_controlled_loops(name, tmp_path):
    case = CASES[name]
    assert check_case(case, tmp_path) == case.paths
