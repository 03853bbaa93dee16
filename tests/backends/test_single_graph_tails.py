"""The single-graph lowering where the two sides of an ``if`` leave a list of different lengths
that the code after it reads (a greedy decoder's ``break``, an append on one side): the rest is
lowered into each side, so each knows its own list; equal to eager on every path, in process
and through the torch-free host."""

from __future__ import annotations

import pytest
import torch
from dycl.hcfg.levers import Levers
from torch import nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch

ON = Levers(single_graph="on")


@pytest.fixture(autouse=True)
def _seeded_weights():
    torch.manual_seed(0)


class GreedyDecoder(nn.Module):
    """A GRU decoder that stops at the end token, as a captioner or a translator does."""

    def __init__(self, vocab: int = 12, hidden: int = 16, max_len: int = 6, end: int = 0) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.cell = nn.GRUCell(hidden, hidden)
        self.out = nn.Linear(hidden, vocab)
        self.max_len, self.end = max_len, end

    def forward(self, h):
        token = torch.full((h.size(0),), 1, dtype=torch.long)  # the start token, one per row
        tokens = []
        for _ in range(self.max_len):
            h = self.cell(self.embed(token), h)
            token = self.out(h).argmax(dim=-1)
            tokens.append(token)
            if token.item() == self.end:
                break
        return torch.stack(tokens, dim=1)


class KeepsConfidentFeatures(nn.Module):
    """Features kept only where a gate says so, then concatenated: a list appended to on one side."""

    def __init__(self, blocks: int = 2) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(blocks)])

    def forward(self, x):
        kept = [x]
        for block in self.blocks:
            x = torch.tanh(block(x))
            if x.mean() > 0:
                kept.append(x)
        return torch.cat(kept, dim=-1)


def _check(model: nn.Module, inputs: list[torch.Tensor], tmp_path, min_paths: int) -> dycl.CompiledModel:
    compiled = dycl.compile(model, inputs[0], optimize=ON)
    assert compiled.stats["single_graph"]["chosen"] == "single_graph", compiled.stats["single_graph"]
    assert len(compiled.manifest.sub_dnns) == 1
    paths = assert_equivalent(model, compiled, inputs, min_paths=min_paths, atol=1e-5)
    assert paths >= min_paths
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, 1e-5)
    assert report["checked"] == len(inputs) and report["problems"] == [], report
    loaded = dycl.load(tmp_path / "artifact")
    assert assert_equivalent(model, loaded, inputs, min_paths=min_paths, atol=1e-5) >= min_paths
    return compiled


def test_a_greedy_decoder_that_breaks_lowers_with_a_tail_per_length(tmp_path):
    model = GreedyDecoder().eval()
    generator = torch.Generator().manual_seed(1)
    inputs = [torch.randn(1, 16, generator=generator) * 3 for _ in range(60)]
    with torch.no_grad():
        lengths = {model(x).shape[1] for x in inputs}
    assert len(lengths) >= 3, lengths  # the inputs stop at several steps
    compiled = _check(model, inputs, tmp_path, min_paths=len(lengths))
    assert compiled.stats["single_graph"]["paths"] == model.max_len  # one return per length


def test_a_list_appended_to_on_one_side_lowers(tmp_path):
    model = KeepsConfidentFeatures().eval()
    generator = torch.Generator().manual_seed(2)
    inputs = [torch.randn(2, 8, generator=generator) * (1 + i % 4) for i in range(48)]
    with torch.no_grad():
        widths = {model(x).shape[-1] for x in inputs}
    assert widths == {8, 16, 24}, widths  # none, one or both features kept
    compiled = _check(model, inputs, tmp_path, min_paths=4)  # each gate's two outcomes
    assert compiled.stats["single_graph"]["paths"] == 4


def test_the_zoo_captioner_lowers_whole_and_agrees_on_every_caption_length(tmp_path):
    from models import caption_googlenet

    model, example = caption_googlenet.build()
    inputs = [caption_googlenet.sample(seed) for seed in range(24)]
    with torch.no_grad():
        lengths = {model(x).shape[1] for x in inputs}
    assert len(lengths) >= 3, lengths
    compiled = dycl.compile(model, example, optimize=ON, dynamic=False)
    chosen = compiled.stats["single_graph"]
    assert chosen["chosen"] == "single_graph" and chosen["paths"] == 12, chosen  # a return per length
    assert assert_equivalent(model, compiled, inputs, min_paths=len(lengths), atol=1e-4) >= len(lengths)
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, 1e-4)
    assert report["checked"] == len(inputs) and report["problems"] == [], report


def test_tails_that_would_repeat_too_much_of_the_graph_keep_the_host(tmp_path):
    model = KeepsConfidentFeatures(blocks=8).eval()  # 2**8 tails: refused, not built
    generator = torch.Generator().manual_seed(3)
    inputs = [torch.randn(2, 8, generator=generator) * (1 + i % 4) for i in range(40)]
    compiled = dycl.compile(model, inputs[0], optimize=ON)
    chosen = compiled.stats["single_graph"]
    assert chosen["chosen"] == "host" and "repeat" in chosen["reason"], chosen
    assert compiled.stats["stages"]["lower"] < 5.0  # refused early, not after building thousands of nodes
    paths = assert_equivalent(model, compiled, inputs, min_paths=4, atol=1e-5)
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, 1e-5)
    assert paths >= 4 and report["checked"] == len(inputs) and report["problems"] == [], report
