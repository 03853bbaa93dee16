"""Grouped-query attention (``F.scaled_dot_product_attention(..., enable_gqa=True)``, what
transformers calls whenever it skips the mask) is translated for ONNX by repeating each
key/value head for its group of query heads (``dycl.backends.onnx_symbolics``); torch's own
translation refuses it. Causal or not, with a symbolic sequence length, on two branches."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch


class GroupedAttention(nn.Module):
    """Eight query heads over two key/value heads; causal where the input's mean is positive."""

    def __init__(self, dim: int = 32, heads: int = 8, kv_heads: int = 2) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * kv_heads * self.head_dim)

    def forward(self, x):
        b, t, _ = x.shape
        q = self.q(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(x).view(b, t, 2 * self.kv_heads, self.head_dim).transpose(1, 2).chunk(2, dim=1)
        if x.mean() > 0:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        return y.transpose(1, 2).reshape(b, t, -1)


def test_grouped_query_attention_agrees_in_process_and_in_the_torch_free_host(tmp_path):
    torch.manual_seed(0)
    model = GroupedAttention().eval()
    generator = torch.Generator().manual_seed(1)
    inputs = [torch.randn(2, length, 32, generator=generator) + shift
              for length in (5, 1, 9) for shift in (-0.5, 0.5)]
    compiled = dycl.compile(model, inputs[0], dynamic={"x": {1: "seq"}})
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) == 2
    report = run_host_without_torch(compiled.save(tmp_path / "gqa"), model, inputs, atol=1e-5)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}
