"""A cache on the module filled in ``forward`` and keyed by a size (``self._cache[n]``, as rotary and
positional-encoding code often does) is refused by what it is, at the line that reads it: not as "a
branch that fails on the example input" (``hcfg.state_key_reads``). A module dict of numbers keyed
by strings is still compiled as state, in process and through the torch-free host."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import dycl
from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host


class RotaryCache(nn.Module):
    """Caches the rotation angles per sequence length."""

    def __init__(self, dim: int = 8):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        self._angles = {}

    def angles(self, seq_len):
        if seq_len not in self._angles:
            t = torch.arange(seq_len).float()
            self._angles[seq_len] = torch.outer(t, self.inv_freq).repeat(1, 2)
        return self._angles[seq_len]

    def forward(self, x):
        h = self.proj(x) * self.angles(x.shape[0]).cos()
        if h.mean() > 0:
            h = h.relu()
        return h


class CallCounter(nn.Module):
    """Counts, in a dict keyed by strings, how often each branch ran."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.counts = {"high": 0, "low": 0}

    def forward(self, x):
        h = self.fc(x)
        if h.mean() > 0:
            self.counts["high"] += 1
            return h * 2
        self.counts["low"] += 1
        return h - 1


def test_a_size_keyed_cache_is_refused_by_what_it_is():
    model = RotaryCache().eval()
    with pytest.raises(dycl.UnsupportedError, match=r"a read of the module dict `self\._angles` by a key it does "
                                                     r"not hold.*a cache keyed by a value of the call at "
                                                     r".*test_size_keyed_cache\.py:\d+\n.*self\._angles\[seq_len\]"):
        dycl.compile(model, torch.randn(5, 8))
    assert model._angles == {}  # compiling left the model as it was


def test_a_string_keyed_dict_of_counts_is_still_compiled(tmp_path):
    generator = torch.Generator().manual_seed(4)
    inputs = [torch.randn(3, 4, generator=generator) * scale for scale in (0.5, 2.0) for _ in range(10)]
    model = CallCounter().eval()
    assert assert_agrees_in_process_and_as_host(model, inputs, tmp_path, 1e-5, min_paths=2) == 2
