"""A model written the way people write attention (``view`` with -1, transposes, a padding
mask filled before a softmax, basic indexing, ``cat``) compiles through ``hcfg.shape_rules``
to the same symbolic shapes as through the ops' own shape functions, and equals eager on
every path, in-process and through the torch-free saved host."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from dycl.hcfg import shape_rules
from dycl.hcfg.levers import Levers

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch

ATOL = 1e-4
DYNAMIC = {"tokens": {0: "batch", 1: "length"}}


class TinyEncoder(nn.Module):
    """Post-norm self-attention layers with an early exit once the first token's features
    settle; token 0 is padding."""

    def __init__(self, vocab: int = 40, d_model: int = 16, heads: int = 4, layers: int = 3) -> None:
        super().__init__()
        self.heads, self.d_head = heads, d_model // heads
        self.embed = nn.Embedding(vocab, d_model)
        self.qkv = nn.ModuleList(nn.Linear(d_model, 3 * d_model) for _ in range(layers))
        self.proj = nn.ModuleList(nn.Linear(d_model, d_model) for _ in range(layers))
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(layers))
        self.head = nn.Linear(2 * d_model, 3)

    def attend(self, layer: int, x, mask):
        b, n, d = x.shape
        q, k, v = self.qkv[layer](x).split(d, dim=-1)
        q = q.reshape(b, -1, self.heads, self.d_head).transpose(1, 2)
        k = k.reshape(b, -1, self.heads, self.d_head).transpose(1, 2)
        v = v.reshape(b, -1, self.heads, self.d_head).permute(0, 2, 1, 3)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.d_head)
        scores = scores.masked_fill(mask[:, None, None, :] == 0, -1e9)
        context = (F.softmax(scores, dim=-1) @ v).transpose(1, 2).contiguous().view(b, n, -1)
        return self.norms[layer](x + self.proj[layer](context))

    def forward(self, tokens):
        mask = tokens != 0
        x = self.embed(tokens) * math.sqrt(self.heads * self.d_head)
        for layer in range(len(self.qkv)):
            x = self.attend(layer, x, mask)
            if x[:, 0].sigmoid().mean() > 0.5:
                break
        pooled = torch.cat([x[:, 0], x.sum(1) / mask.sum(1, keepdim=True)], dim=-1)
        return self.head(pooled)


def _model() -> TinyEncoder:
    torch.manual_seed(3)
    return TinyEncoder().eval()


def _tokens(batch: int, length: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(1, 40, (batch, length), generator=generator)
    tokens[:, length // 2 + 1:] *= torch.rand(batch, 1, generator=generator) > 0.5  # padded tails
    return tokens


INPUTS = [_tokens(batch, length, seed) for seed, (batch, length) in enumerate(
    [(1, 3), (2, 7), (3, 5), (1, 9), (4, 4), (2, 11), (5, 6), (1, 2), (3, 8), (2, 3)] * 3)]


HOST_FORM = Levers(single_graph="off")


@pytest.fixture(scope="module")
def compiled():
    model = _model()
    # the host form: its sub-DNNs' ports carry the shapes read here ("auto" may pick the one graph by timing)
    return model, dycl.compile(model, _tokens(2, 6, 99), dynamic=DYNAMIC, optimize=HOST_FORM)


def _port_shapes(result) -> dict:
    return {name: [port["shape"] for port in entry["inputs"] + entry["outputs"]]
            for name, entry in result.manifest["sub_dnns"].items()}


def test_the_rules_give_the_ops_symbolic_shapes(compiled, monkeypatch):
    model, ruled = compiled
    monkeypatch.setattr(shape_rules, "_RULES", {})
    plain = dycl.compile(model, _tokens(2, 6, 99), dynamic=DYNAMIC, optimize=HOST_FORM)
    assert _port_shapes(ruled) == _port_shapes(plain)
    shapes = [shape for ports in _port_shapes(ruled).values() for shape in ports]
    assert ["batch", "length", 16] in shapes  # the attention layers keep both dims symbolic
    assert ruled.stats["symbolic_fallbacks"] == 0


def test_compiled_equals_eager_on_every_path(compiled, tmp_path):
    model, result = compiled
    assert assert_equivalent(model, result, INPUTS, min_paths=4, atol=ATOL) == 4  # an exit after 1, 2, 3 layers or none
    artifact = result.save(tmp_path / "encoder")
    report = run_host_without_torch(artifact, model, INPUTS, ATOL)
    assert report["checked"] == len(INPUTS) and report["problems"] == []
