"""Issue 29 lever 3: a residual connection (``identity = out``) no longer splits a sub-DNN in
two (``hcfg.merge_renames``): fewer runtime calls per call, the same outputs as eager in
process and as a torch-free host, with the lever on and off."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from dycl.hcfg.levers import Levers

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch

ATOL = 1e-4


class ResidualEarlyExit(nn.Module):
    """A small ResNet-style classifier that may stop after its first stage."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.stages = nn.ModuleList(
            nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU()) for _ in range(3))
        self.early = nn.Linear(8, 4)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        out = self.stem(x)
        for i, stage in enumerate(self.stages):
            identity = out
            out = stage(out)
            out = out + identity
            if i == 0:
                logits = self.early(out.mean(dim=(2, 3)))
                if logits.softmax(dim=-1).max() > 0.4:
                    return logits
        return self.head(out.mean(dim=(2, 3)))


def _inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(11)
    return [torch.randn(1, 3, 12, 12, generator=generator) * scale for scale in (0.1, 0.5, 1, 3, 8) for _ in range(3)]


def _runs_per_call(compiled: dycl.CompiledModel, inputs: list[torch.Tensor]) -> float:
    host, count = compiled._host, [0]

    def counted(executable):
        def call(*args):
            count[0] += 1
            return executable(*args)
        return call

    host._variants = {index: {key: counted(e) for key, e in v.items()} for index, v in host._variants.items()}
    host._call = {index: next(iter(v.values())) for index, v in host._variants.items() if len(v) == 1}
    for x in inputs:
        compiled(x)
    return count[0] / len(inputs)


@pytest.fixture(scope="module")
def model() -> ResidualEarlyExit:
    torch.manual_seed(6)
    return ResidualEarlyExit().eval()


def test_a_residual_connection_costs_no_boundary(model, tmp_path):
    on = dycl.compile(model, _inputs()[0])
    off = dycl.compile(model, _inputs()[0], optimize=Levers(merge_across_renames=False))
    for compiled in (on, off):
        assert assert_equivalent(model, compiled, _inputs(), min_paths=2, atol=ATOL) == 2
    assert on.stats["sub_dnns"] < off.stats["sub_dnns"]
    assert _runs_per_call(on, _inputs()) < _runs_per_call(off, _inputs())
    report = run_host_without_torch(on.save(tmp_path / "artifact"), model, _inputs(), ATOL)
    assert report["checked"] == len(_inputs()) and not report["problems"], report


class InPlaceResidual(nn.Module):
    """``identity = h`` then an in-place ReLU on ``h``: in eager the ReLU's write reaches ``identity``
    too. With the rename on the host, the two were separate arrays and the result differed
    (the self-check refused it); merged into one graph, the write is shared as in eager."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.relu = nn.ReLU(inplace=True)
        self.out = nn.Linear(6, 2)

    def forward(self, x):
        h = self.fc(x)
        identity = h
        h = self.relu(h)
        h = h + identity
        if h.mean() > 0.4:
            return self.out(h)
        return -h[:, :2]


def test_an_in_place_activation_after_the_rename_agrees_with_eager(tmp_path):
    torch.manual_seed(0)
    model = InPlaceResidual().eval()
    generator = torch.Generator().manual_seed(2)
    inputs = [torch.randn(1, 6, generator=generator) * scale for scale in (0.5, 1, 2, 4) for _ in range(4)]
    compiled = dycl.compile(model, inputs[0])
    assert compiled.stats["sub_dnns"] == 3  # fc, relu and the test in one; a sub-DNN per branch
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=ATOL) == 2
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, ATOL)
    assert report["checked"] == len(inputs) and not report["problems"], report
