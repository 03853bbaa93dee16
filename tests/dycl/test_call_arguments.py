"""The compiled model's call takes the tensors people pass: a plain CPU tensor (the fast path
that skips the pytree walk, ``dycl.api._host_arguments``), one that requires grad, a
transposed view, a Parameter, a keyword argument: each gives what eager gives, on several
paths, in process and through the torch-free host."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch


class GatedHead(nn.Module):
    """A classifier head that skips its hidden layer when the features are already confident."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Linear(8, 8)
        self.out = nn.Linear(8, 3)

    def forward(self, features: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        if F.softmax(features, dim=-1).max() > 0.5:
            return self.out(features * scale)
        return self.out(torch.relu(self.hidden(features)) * scale)


def _inputs() -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(7)
    items = []
    for index in range(12):
        features = torch.randn(2, 8, generator=generator) * (0.2 if index % 2 else 4.0)
        scale = torch.rand(8, generator=generator) + 0.5
        kind = index % 4
        if kind == 1:
            features = features.clone().requires_grad_(True)
        elif kind == 2:
            features = torch.randn(8, 2, generator=generator).t() * (0.2 if index % 3 else 4.0)  # a transposed view
        elif kind == 3:
            scale = nn.Parameter(scale)
        items.append((features, scale))
    return items


def test_each_kind_of_tensor_argument_gives_eagers_answer_in_process_and_on_the_host(tmp_path):
    torch.manual_seed(0)
    model = GatedHead().eval()
    inputs = _inputs()
    compiled = dycl.compile(model, (inputs[0][0].detach(), inputs[0][1].detach()))
    assert not inputs[2][0].is_contiguous() and inputs[1][0].requires_grad and isinstance(inputs[3][1], nn.Parameter)
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) == 2
    with torch.no_grad():
        by_keyword = compiled(inputs[0][0], scale=inputs[0][1])
        assert torch.allclose(by_keyword, model(inputs[0][0], inputs[0][1]), atol=1e-5)
    plain = [(f.detach(), s.detach()) for f, s in inputs]
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, plain, 1e-5)
    assert report == {"checked": len(plain), "problems": [], "torch_loaded": False}, report
