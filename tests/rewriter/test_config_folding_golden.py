"""Golden before/after snippets: constant propagation folds a module method that returns a
static expression (``rewriter.pure_methods``) and drops the binding of a static parameter
whose reads were all folded (``rewriter.dead_containers``); the values it read from the
model's modules are recorded for the config guard (``rewriter.config_reads``)."""

from __future__ import annotations

import torch
import torch.nn as nn

from dycl import rewriter
from dycl.harness.testing import assert_equivalent
from tests.rewriter.golden import after, golden


class Stage(nn.Module):
    def __init__(self, pooled: bool) -> None:
        super().__init__()
        self.pooled = pooled
        self.linear = nn.Linear(4, 4)

    def mode(self):
        return "pool" if self.pooled else "keep"

    def forward(self, x):
        return self.linear(x)


class Staged(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stages = nn.ModuleList([Stage(False), Stage(True)])
        self.limits = [0.2, 0.4]

    def exits(self, x, limits):
        for i, stage in enumerate(self.stages):
            x = stage(x)
            if stage.mode() == "pool":
                x = x * 0.5
            if x.mean() > limits[i]:
                return x
        return -x

    def forward(self, x):
        return self.exits(x, self.limits)


def test_a_static_method_is_folded_and_the_folded_parameter_unbound():
    assert after(Staged(), "constprop") == golden("""
        x_1 = x
        x_1 = self.stages[0](x_1)
        if x_1.mean() > 0.2:
            return x_1
        else:
            x_1 = self.stages[1](x_1)
            x_1 = x_1 * 0.5
            if x_1.mean() > 0.4:
                return x_1
            else:
                return -x_1
    """)


def test_the_folded_rewrite_agrees_and_records_what_it_read():
    torch.manual_seed(0)
    model = Staged().eval()
    rewritten = rewriter.rewrite(model)
    generator = torch.Generator().manual_seed(1)
    inputs = [torch.randn(2, 4, generator=generator) * 3 for _ in range(30)]
    assert assert_equivalent(model, rewritten.bind(model), inputs, min_paths=2) >= 2
    read = {(id(r.module), r.name) for r in rewritten.config_reads}
    assert {(id(model), "limits"), (id(model.stages[1]), "pooled")} <= read
