"""A decorator that post-processes ``forward``'s output by its type (``if isinstance(out, tuple):``)
where ``forward`` returns a tuple holding Python numbers (a counter, a size): the tuple is a tuple on
every call of the path that built it, so the type test is decided by the explored states
(``hcfg.type_tests``) and only its branch is compiled; in process and through the torch-free host."""

from __future__ import annotations

import functools

import torch
import torch.nn as nn

from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host


def tanh_out(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        out = fn(*args, **kwargs)
        if isinstance(out, tuple):
            return (torch.tanh(out[0]),) + out[1:]
        return torch.tanh(out)
    return wrapper


def with_stats(fn):
    @functools.wraps(fn)
    def wrapper(self, x):
        out = fn(self, x)
        if isinstance(out, (tuple, list)):
            logits, *extra = out
            return {"logits": logits, "extra": extra}
        return {"logits": out, "extra": []}
    return wrapper


class CountingBlocks(nn.Module):
    """Runs its blocks while the activations stay small, and reports how many ran."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(5, 5) for _ in range(3)])

    @tanh_out
    def forward(self, x):
        ran = 0
        for block in self.blocks:
            if x.abs().mean() > 1.5:
                break
            x = block(x)
            ran += 1
        return x, ran, x.shape[0]


class ScaledHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(5, 3)

    @with_stats
    def forward(self, x):
        logits = self.head(x)
        scale = 1.0
        if logits.max() > 1.0:
            scale = 0.5
            logits = logits * scale
        return logits, scale


def _inputs(seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, 5, generator=generator) * scale
            for batch in (2, 1, 3) for scale in (0.3, 1.0, 2.0, 5.0) for _ in range(4)]


def test_a_tuple_with_a_counter_through_a_type_testing_decorator(tmp_path):
    assert assert_agrees_in_process_and_as_host(CountingBlocks(), _inputs(1), tmp_path, 1e-5, min_paths=3) >= 3


def test_a_tuple_with_a_float_unpacked_by_a_decorator(tmp_path):
    assert assert_agrees_in_process_and_as_host(ScaledHead(), _inputs(2), tmp_path, 1e-5, min_paths=2) >= 2
