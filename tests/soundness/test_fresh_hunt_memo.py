"""Fresh hunt, family 10: caches and memos around ``forward`` (``functools.lru_cache`` on a
module-level helper or on a method, keyed by a size; a class-level dict filled on first use;
a value from the first call's data memoised on ``self``; an ``itertools.count`` on ``self``).
A cache keyed by a size compiles (its value is a function of the size); one that outlives the
call and is written in ``forward`` is refused at its line, never frozen."""

from __future__ import annotations

import functools
import itertools
import operator

import pytest
import torch
import torch.nn as nn

from tests.soundness.fresh_hunt import Case, at, check_case, seeded

# cached library functions: a cached function of the test's own would add its lines to the paths on a miss
_window = functools.lru_cache(maxsize=None)(torch.hann_window)


class WindowedEnergy(nn.Module):
    def forward(self, x):  # x: (L,)
        y = x * _window(x.shape[0])
        if y.sum() > 0:
            return y
        return -y


class CausalMask(nn.Module):
    @functools.lru_cache(maxsize=4)  # noqa: B019 - written as other people write it
    def causal(self, n):
        return torch.tril(torch.ones(n, n, dtype=torch.bool))

    def forward(self, x):  # x: (n, n)
        y = x.masked_fill(~self.causal(x.shape[0]), 0.0)
        if y.sum() > 0:
            return y
        return -y


_divide = functools.lru_cache(maxsize=8)(operator.truediv)


class ScaleByArgmax(nn.Module):  # the cache is keyed by a number from data: the host calls it per call
    def forward(self, x):  # x: (5,)
        k = int(x.argmax())
        if k > 2:
            return x * _divide(1.0, k + 1)
        return x


class RampTable(nn.Module):  # a class-level table filled on first use
    _table = {}

    def forward(self, x):
        n = x.shape[-1]
        if n not in RampTable._table:
            RampTable._table[n] = torch.linspace(0, 1, n)
        y = x * RampTable._table[n]
        if y.sum() > 0:
            return y
        return -y


class ScaleFromFirstCall(nn.Module):  # calibrates on the first batch it sees
    def __init__(self):
        super().__init__()
        self.scale = None

    def forward(self, x):
        if self.scale is None:
            self.scale = x.abs().max()
        return x / self.scale


class CallCounter(nn.Module):
    def __init__(self):
        super().__init__()
        self.counter = itertools.count()

    def forward(self, x):
        n = next(self.counter)
        if x.sum() > 0:
            return x * 2 + n * 0
        return x


def _inputs(seed, shape, spread=1.0):
    def make():
        g = seeded(seed)
        return [torch.randn(*shape, generator=g) + (i % 2 - 0.5) * 2 * spread for i in range(50)]
    return make


def _square_inputs():
    g = seeded(102)
    return [torch.randn(3, 3, generator=g) + (i % 2 - 0.5) * 2 for i in range(50)]


def _lengths():  # the first input's length, then others
    g = seeded(107)
    return [torch.randn(6 + i % 3, generator=g) + (i % 2 - 0.5) * 2 for i in range(50)]


CASES = {
    "lru_cache_window": Case(WindowedEnergy, _inputs(101, (6,)), 2),
    "lru_cache_window_other_lengths": Case(WindowedEnergy, _lengths, 2),
    "lru_cache_method_mask": Case(CausalMask, _square_inputs, 2),
    "lru_cache_keyed_by_data": Case(ScaleByArgmax, _inputs(103, (5,), 0.0), 2),
    "class_level_table": Case(RampTable, _inputs(104, (2, 4)), 2,
                              refused=at("a change to a dict that outlives the call",
                                         "RampTable._table[n] = torch.linspace(0, 1, n)")),
    "memo_of_first_call": Case(ScaleFromFirstCall, _inputs(105, (2, 4)), 2,
                               refused=at("write to module state", "self.scale = x.abs().max()")),
    "counter_on_self": Case(CallCounter, _inputs(106, (2, 4)), 2,
                            refused=at("mixes the model with Python values", "n = next(self.counter)")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_cache_or_memo(name, tmp_path):
    case = CASES[name]
    assert check_case(case, tmp_path) == case.paths
