"""A submodule's ``forward`` inlined into its parent, whose generator expression, list
comprehension or lambda reads ``self``: the inlined receiver is a static the rewriter folds
into a model path, inside those scopes too (their own names shadow it), so nothing in them
refers to the receiver's binding that folding removed (it failed with ``NameError: self_1``)."""

from __future__ import annotations

import torch
from torch import nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch


class MultiScale(nn.Module):
    """Sums a layer over a list of scales held by the module; a gate on the input's mean."""

    def __init__(self) -> None:
        super().__init__()
        self.scales = [0.5, 1.0, 2.0]
        self.proj = nn.Linear(6, 6)
        self.heads = nn.ModuleList(nn.Linear(6, 6) for _ in range(2))

    def forward(self, x):
        if x.mean() > 0:
            x = torch.relu(x)
        mixed = sum(self.proj(x) * scale for scale in self.scales)
        heads = [head(mixed) for head in self.heads]
        gate = lambda t: torch.sigmoid(self.proj(t))  # noqa: E731 - as people write it
        return gate(heads[0]) + heads[1]


class Wrapper(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = MultiScale()

    def forward(self, x):
        return self.body(x) * 2


def test_scopes_inside_an_inlined_forward_read_the_submodule(tmp_path):
    torch.manual_seed(0)
    model = Wrapper().eval()
    generator = torch.Generator().manual_seed(3)
    inputs = [torch.randn(batch, 6, generator=generator) + shift for batch in (1, 3) for shift in (-1.0, 1.0)]
    compiled = dycl.compile(model, inputs[0])
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) == 2
    report = run_host_without_torch(compiled.save(tmp_path / "scopes"), model, inputs, atol=1e-5)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}
