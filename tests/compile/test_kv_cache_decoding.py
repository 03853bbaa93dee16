"""KV-cache decoding written by hand, the way people write it before they reach for a library:
a tuple of ``(keys, values)`` per layer concatenated at each step, or a small cache object
whose ``update`` rebinds its tensors. The decoding loop stops at an end-of-sequence token,
so prompts take different numbers of one-token steps (paths); compiled with a symbolic
prompt length, checked in process and as a torch-free host. A cache grown in place and read
again through a variable the compiled part did not bind is refused, not answered stale."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch

VOCAB = 23


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x, past=None):
        b, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(b, t, self.heads, -1).transpose(1, 2)
        k = k.view(b, t, self.heads, -1).transpose(1, 2)
        v = v.view(b, t, self.heads, -1).transpose(1, 2)
        if past is not None:
            k = torch.cat([past[0], k], dim=2)
            v = torch.cat([past[1], v], dim=2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=past is None)
        return self.out(y.transpose(1, 2).reshape(b, t, d)), (k, v)


class TinyLM(nn.Module):
    """Returns logits and a tuple of (k, v) per layer; takes the tuple back."""

    def __init__(self, dim: int = 16, heads: int = 2, layers: int = 2) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, dim)
        self.layers = nn.ModuleList(Attention(dim, heads) for _ in range(layers))
        self.head = nn.Linear(dim, VOCAB)

    def forward(self, ids, past=None):
        x = self.emb(ids)
        present = []
        for i, layer in enumerate(self.layers):
            h, kv = layer(x, None if past is None else past[i])
            x = x + h
            present.append(kv)
        return self.head(x), tuple(present)


class TupleCacheDecoder(nn.Module):
    def __init__(self, lm: nn.Module, max_new: int, eos: int) -> None:
        super().__init__()
        self.lm = lm
        self.max_new = max_new
        self.eos = eos

    def forward(self, prompt):
        logits, past = self.lm(prompt)
        token = logits[:, -1].argmax(-1, keepdim=True)
        out = [token]
        for _ in range(self.max_new - 1):
            if token.item() == self.eos:
                break
            logits, past = self.lm(token, past)
            token = logits[:, -1].argmax(-1, keepdim=True)
            out.append(token)
        return torch.cat(out, dim=1)


class Cache:
    """A cache object as a library keeps one: ``update`` rebinds the layer's tensors."""

    def __init__(self) -> None:
        self.keys = None
        self.values = None

    def update(self, k, v):
        if self.keys is not None:
            k = torch.cat([self.keys, k], dim=2)
            v = torch.cat([self.values, v], dim=2)
        self.keys, self.values = k, v
        return k, v


def _attend(attention: Attention, x, cache: Cache):
    b, t, d = x.shape
    q, k, v = attention.qkv(x).chunk(3, dim=-1)
    q = q.view(b, t, attention.heads, -1).transpose(1, 2)
    k = k.view(b, t, attention.heads, -1).transpose(1, 2)
    v = v.view(b, t, attention.heads, -1).transpose(1, 2)
    causal = cache.keys is None  # the prompt: nothing cached yet
    k, v = cache.update(k, v)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return attention.out(y.transpose(1, 2).reshape(b, t, d))


class CacheLM(nn.Module):
    """One layer over a ``Cache`` object; returns the cache it used (a new one at first)."""

    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, dim)
        self.attention = Attention(dim, 2)
        self.head = nn.Linear(dim, VOCAB)

    def forward(self, ids, cache=None):
        cache = Cache() if cache is None else cache
        x = self.emb(ids)
        return self.head(x + _attend(self.attention, x, cache)), cache


class ObjectCacheDecoder(TupleCacheDecoder):
    """As users write it with a cache object: ``past`` bound again from each call."""


class InPlaceCacheDecoder(TupleCacheDecoder):
    """Relies on the cache growing in place: ``past`` is never bound again."""

    def forward(self, prompt):
        logits, past = self.lm(prompt)
        token = logits[:, -1].argmax(-1, keepdim=True)
        out = [token]
        for _ in range(self.max_new - 1):
            if token.item() == self.eos:
                break
            logits, _ = self.lm(token, past)
            token = logits[:, -1].argmax(-1, keepdim=True)
            out.append(token)
        return torch.cat(out, dim=1)


def _prompts(count: int, length: int, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(0, VOCAB, (1, length), generator=generator) for _ in range(count)]


def _decoder(cls, lm: nn.Module, inputs: list[torch.Tensor]) -> nn.Module:
    """``cls`` around ``lm`` with the token generated most often as end-of-sequence."""
    with torch.no_grad():
        free = cls(lm, 4, -1).eval()
        counts = Counter(t for ids in inputs for t in free(ids)[0, :-1].tolist())
    return cls(lm, 4, counts.most_common(1)[0][0]).eval()


@pytest.mark.parametrize("cls, lm", [(TupleCacheDecoder, TinyLM), (ObjectCacheDecoder, CacheLM)],
                         ids=["tuple-of-kv", "cache-object"])
def test_a_hand_written_kv_cache_decoder_agrees_with_eager(cls, lm, tmp_path):
    torch.manual_seed(0)
    inputs = _prompts(10, 5, seed=1)
    model = _decoder(cls, lm().eval(), inputs)
    compiled = dycl.compile(model, inputs[0], dynamic={"prompt": {1: "length"}})
    inputs += _prompts(3, 8, seed=2) + _prompts(3, 2, seed=3)
    assert assert_equivalent(model, compiled, inputs, min_paths=3, atol=1e-5) >= 3  # 1, 2, ... 4 tokens
    report = run_host_without_torch(compiled.save(tmp_path / "kv"), model, inputs, atol=1e-5)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


def test_a_cache_grown_in_place_and_read_again_is_refused():
    torch.manual_seed(0)
    model = InPlaceCacheDecoder(CacheLM().eval(), 4, -1).eval()
    with pytest.raises(dycl.UnsupportedError, match="`past`, an object whose attributes a compiled part changes"):
        dycl.compile(model, _prompts(1, 5, seed=1)[0])
