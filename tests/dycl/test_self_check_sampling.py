"""The self-check of a model that samples: a drawn value may decide a branch that changes the
output's shape, so the compiled model's structure is compared with several eager draws, not one
(found by the fuzz campaign, seed 3031 program 582, on the torch backend, which runs the sampling
ops as torch does)."""

from __future__ import annotations

import torch
from torch import nn

import dycl


class DropoutDecides(nn.Module):
    """Dropout in eval mode too (``F.dropout`` defaults to ``training=True``): the mean after it
    decides whether rows are appended."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.dropout(self.fc(x), 0.5)
        if x.mean().item() < 0.0:
            return x
        return torch.cat([x, x * 0.5], 0)[:3]


def test_a_sampled_branch_is_not_reported_as_a_difference():
    torch.manual_seed(0)
    model = DropoutDecides().eval()
    example = torch.tensor([[0.1, -0.2, 0.05, 0.0, -0.1, 0.2]])
    shapes = set()
    for seed in range(12):  # each compile's self-check draws anew: both branches are taken over these
        torch.manual_seed(seed)
        compiled = dycl.compile(model, (example,), backend="torch")
        shapes |= {tuple(compiled(example).shape) for _ in range(10)}
    assert shapes == {(1, 6), (2, 6)}  # both paths, by the draw


def test_a_structure_no_draw_gives_is_still_reported():
    """The draws excuse only what eager can return: a compiled model whose shape no eager draw
    has (here a stand-in for a wrong compile) still fails the check."""
    from dycl.harness import self_check

    torch.manual_seed(0)
    model = DropoutDecides().eval()
    example = torch.tensor([[0.1, -0.2, 0.05, 0.0, -0.1, 0.2]])
    compiled = dycl.compile(model, (example,), backend="torch", check=False)

    def wrong(x: torch.Tensor) -> torch.Tensor:
        return torch.cat([compiled(x)] * 3, 0)  # 3 or 6 rows: eager returns 1 or 2

    subject = self_check.subject(model, wrong, compiled._result, (example,), {})
    try:
        self_check.run(subject)
    except dycl.SelfCheckError as error:
        assert "the model samples" in str(error)
    else:
        raise AssertionError("a shape eager never returns passed the self-check")
