"""``and``/``or`` on tensor data compile (issue 27), and a value that is a tensor on one path and
a Python number on another reaches the graph compiled for it.

``if has_exit and probs.max() > t:`` and ``keep = a.sum() > 0 and a.std() < 1`` used to put
``bool()`` of a tensor inside one exported graph and were refused (found by s27state and
s27batch on main). ``rewriter.choices`` now tests the operands one by one on the host, where
Python evaluates them. The second model is a pre-existing wrong answer this exposed: the
host picked a sub-DNN's variant by ``np.ndim``, which is 0 both for a 0-d tensor and a Python
number, so ``scale`` (a bool tensor on one branch, ``0.5`` on the other) ran the tensor's graph on 0.5.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch


class ConfidentExit(nn.Module):
    """Leaves early when the gate fires and the exit head is confident."""

    def __init__(self, threshold: float = 0.55, use_exit: bool = True) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 6), nn.Tanh())
        self.exit = nn.Linear(6, 3)
        self.final = nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 3))
        self.threshold, self.use_exit = threshold, use_exit

    def forward(self, x):
        h = self.body(x)
        has_exit = h.max() > 0.2
        logits = self.exit(h)
        if self.use_exit and has_exit and F.softmax(logits, -1).max() > self.threshold:
            return logits
        if not (h.mean() > 0 or h.min() > -0.5):
            h = h * 0.5
        return self.final(h)


class GatedResidual(nn.Module):
    def __init__(self, mode: str = "sum") -> None:
        super().__init__()
        self.a = nn.Linear(6, 6)
        self.b = nn.Linear(6, 6)
        self.mode = mode

    def forward(self, x):
        h = self.a(x)
        keep = h.sum() > 0 and h.std() < 1.0
        if keep:
            h = self.b(h)
        if (h.mean() > 0 and self.mode == "sum") or h.max() > 2:
            h = h + 1
        return h


class NumberOrTensor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(6, 6)

    def forward(self, x):
        h = self.a(x)
        if h.sum() > 0:
            scale = h.abs().max() > 1
        else:
            scale = 0.5
        return h * scale


def _inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return [torch.randn(batch, 6, generator=generator) * spread
            for batch in (1, 2) for spread in (0.3, 1.0, 3.0) for _ in range(6)]


@pytest.mark.parametrize("model_class, paths", [(ConfidentExit, 3), (GatedResidual, 4), (NumberOrTensor, 2)])
def test_agrees_with_eager_in_process_and_through_the_host(model_class, paths, tmp_path):
    torch.manual_seed(0)
    model = model_class().eval()
    compiled = dycl.compile(model, torch.randn(1, 6))
    assert assert_equivalent(model, compiled, _inputs(), min_paths=paths, atol=1e-5) >= paths
    compiled.save(tmp_path / "artifact")
    result = run_host_without_torch(tmp_path / "artifact", model, _inputs(), atol=1e-5)
    assert result["checked"] == len(_inputs()) and not result["problems"], result["problems"][:3]
