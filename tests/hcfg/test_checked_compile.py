"""With checking on (as in the whole suite), ``dycl.compile`` checks the HCFG after
every graph pass it runs, and the compiled model still equals eager on both paths."""

from __future__ import annotations

import torch
from dycl.hcfg import verify
from torch import nn

import dycl


class Gate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        h = torch.zeros(1, 4)  # a constant: hoisted
        y = self.a(x) + h
        if y.sum() > 0:
            y = self.b(y)
        return y * 2


def test_compile_checks_after_each_graph_pass(monkeypatch):
    seen: list[str | None] = []
    real = verify.verify

    def counting(graph, after=None):
        seen.append(after)
        real(graph, after)

    monkeypatch.setattr(verify, "verify", counting)
    model = Gate().eval()
    compiled = dycl.compile(model, torch.ones(1, 4), backend="torch")
    assert {"annotate", "hoist_constants", "merge_into_producers"} <= set(seen), seen
    branches = set()
    for seed in range(8):
        x = torch.randn(1, 4, generator=torch.Generator().manual_seed(seed)) * 3
        torch.testing.assert_close(compiled(x), model(x))
        branches.add(bool((model.a(x)).sum() > 0))
    assert branches == {True, False}
