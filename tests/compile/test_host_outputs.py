"""Outputs of the ONNX Runtime host: data-dependent output shapes change from call
to call (with every host setting of ``DYCL_ORT_*``), and an output handed to the
caller can be changed without changing what the next call returns."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import dycl
from dycl.harness.testing import assert_equivalent, outputs_match
from dycl.harness.testing_host import run_host_without_torch

ATOL = 1e-5


class Masked(nn.Module):
    """``h[h > 0]`` has as many elements as ``h`` has positive ones; the fallback
    branch returns a constant, which the compiler hoists into the artifact."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        h = self.fc(x)
        kept = h[h > 0]
        if kept.sum() > 1.0:
            return kept * 2, torch.zeros(2)
        return kept - 1, torch.ones(2)


def _inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    return [torch.randn(1, 6, generator=generator) for _ in range(30)]


def _model() -> Masked:
    torch.manual_seed(0)
    return Masked().eval()


def test_a_data_dependent_output_shape_follows_each_call():
    model, inputs = _model(), _inputs()
    compiled = dycl.compile(model, inputs[0])
    kept = compiled.manifest["sub_dnns"]["subdnn_0"]["outputs"][0]
    assert isinstance(kept["shape"][0], str), kept
    sizes = {int(compiled(x)[0].shape[0]) for x in inputs}
    assert len(sizes) >= 3, sizes
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=ATOL) == 2


def test_changing_a_returned_constant_leaves_the_next_call_alone():
    model, inputs = _model(), _inputs()
    compiled = dycl.compile(model, inputs[0])
    assert compiled.stats["constants"] >= 1
    for x in inputs[:10]:
        first = compiled(x)
        first[0].add_(100.0)
        first[1].add_(100.0)
        with torch.no_grad():
            assert outputs_match(model(x), compiled(x), atol=ATOL) is None


@pytest.mark.parametrize("setting", [{}, {"DYCL_ORT_CALL": "iobinding"}, {"DYCL_ORT_POOL": "global"},
                                     {"DYCL_ORT_LOAD": "lazy"}])
def test_every_host_setting_follows_batch_and_data_dependent_shapes(setting, tmp_path):
    model = _model()
    generator = torch.Generator().manual_seed(5)
    inputs = [torch.randn(batch, 6, generator=generator) for batch in (1, 1, 3, 2, 1, 4, 4, 1) for _ in range(3)]
    compiled = dycl.compile(model, inputs[0])
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=ATOL) == 2
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, ATOL, env=setting)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}
