"""``may_be_random``: samplers, hidden samplers (submodules, helpers) and
``torch.nn.init`` count as random; visible deterministic calls do not; and a
model whose "constant" is a sample keeps drawing a new one per call when compiled."""

from __future__ import annotations

import pytest
import torch
from dycl.hcfg.randomness import may_be_random
from torch import nn

import dycl
from tests.hcfg.graphs import stmt

LOCALS = frozenset({"x", "h"})


@pytest.mark.parametrize("text", [
    "h = torch.randn(1, 4)", "h = torch.empty(3).cauchy_()", "h = x.new_empty(2).geometric_(0.5)",
    "h = F.dropout(x, 0.5, True)", "h = torch.nn.init.orthogonal_(torch.empty(3, 3))", "h = self.noise()",
    "h = helper(2)", "h = torch.zeros(2) + self.sampler.draw()", "h = random.random()",
    "h = torch.distributions.Normal(0, 1).sample()", "h = torch.rand_like(x)", "torch.manual_seed(0)",
    "h = fns[0](2)",
])
def test_what_may_draw_random_numbers(text):
    assert may_be_random(stmt(text, at=3), LOCALS)


@pytest.mark.parametrize("text", [
    "h = torch.zeros(1, 4) + 0.5", "h = x.expand(2, 4).sum(0)", "h = F.pad(x, (1, 1))", "h = len(x) * 2",
    "h = self.table * 2", "h = torch.arange(4.0).view(2, 2)[0]", "h = math.sqrt(2.0) * x",
])
def test_what_cannot(text):
    assert not may_be_random(stmt(text, at=3), LOCALS)  # the location comment (model.py) is not code


# this file's name must not look like a sampler: statements carry it in their location comments
class Noisy(nn.Module):
    """A "constant" that is a sample, hidden in a submodule and in a helper."""

    class Noise(nn.Module):
        def forward(self):
            return torch.randn(1, 4)

    def __init__(self) -> None:
        super().__init__()
        self.noise = Noisy.Noise()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        h = self.noise()
        g = _cauchy()
        y = self.lin(x)
        if y.sum() > 0:
            y = y + 1
        return y + h, g


def _cauchy():
    return torch.empty(1, 4).cauchy_()


def test_a_hidden_sample_is_drawn_on_every_compiled_call():
    compiled = dycl.compile(Noisy().eval(), torch.ones(1, 4), backend="torch")
    assert compiled.stats["constants"] == 0
    first, second = compiled(torch.ones(1, 4)), compiled(torch.ones(1, 4))
    assert not torch.equal(first[0], second[0]) and not torch.equal(first[1], second[1])
