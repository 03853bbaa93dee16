"""Numbers a tensor statement reads out of Python containers whose structure differs between
paths (a list one branch appends to, a dict one branch adds a key to) are computed on the host
(``hcfg.host_reads``), so the sub-DNN gets one number, not containers of two structures
(issue 27: found by the fuzzer as "`vals` with a different structure on two paths")."""

from __future__ import annotations

import torch
import torch.nn as nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch


class WeightedBlend(nn.Module):
    """Collects blend weights in a list as branches fire, then averages with them."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 6)

    def forward(self, x):
        weights = [1.0]
        h = self.proj(x)
        if h.mean() > 0:
            weights.append(0.5)
            h = torch.relu(h)
        if h.std() > 1.0:
            weights.append(0.25)
            h = h / 2
        return h * sum(weights) / len(weights) + weights[-1]


class OptionalScale(nn.Module):
    """Options gathered in a dict; one branch sets a key the rest of forward looks up."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 3)

    def forward(self, x):
        options = {"bias": 0.1}
        if x.sum() > 0:
            options["scale"] = 3.0
        y = self.proj(x) * options.get("scale", 1.0)
        return y + options["bias"] * len(options)


def _inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(11)
    return [torch.randn(2, 6, generator=generator) * s + b for s in (0.2, 2.0) for b in (-1.0, 0.0, 1.0)
            for _ in range(2)]


def _check(model: nn.Module, tmp_path) -> int:
    compiled = dycl.compile(model, _inputs()[0])
    paths = assert_equivalent(model, compiled, _inputs(), atol=1e-5)
    report = run_host_without_torch(compiled.save(tmp_path / "art"), model, _inputs(), atol=1e-5)
    assert report["checked"] == len(_inputs()) and not report["problems"], report
    return paths


def test_a_list_of_weights_of_three_lengths(tmp_path):
    torch.manual_seed(0)
    assert _check(WeightedBlend().eval(), tmp_path) == 4  # each branch taken or not


def test_a_dict_with_a_key_on_one_path(tmp_path):
    torch.manual_seed(0)
    assert _check(OptionalScale().eval(), tmp_path) == 2
